//! An event's `print fmt` as an expression tree, evaluated per record the way
//! libtraceevent does (`trace-cmd report` prints through it).
//!
//! [`PrintFmt::parse`] turns `"FORMAT", ARG, ARG...` into a list of printf
//! pieces plus argument expressions once per event format; [`PrintFmt::write`]
//! renders one record. Supported: printf conversions with flags, width,
//! precision and length modifiers; `REC->field`; `__get_str`,
//! `__get_dynamic_array`, `__get_dynamic_array_len`, `__get_bitmask`;
//! `__print_symbolic`, `__print_flags`, `__print_hex`, `__print_hex_str`,
//! `__print_array`; `%pS %ps %pF %pf %pB`, `%pI4 %pI6 %pM %pU`, `%pK`;
//! ternaries, unary and binary arithmetic, comparisons, casts and `sizeof`.
//! Anything else makes [`PrintFmt::parse`] fail, and the caller prints the
//! event's fields as `name=value` instead.
//!
//! Why one file of ~2,000 lines: the tokenizer and parser (first half), the
//! compiled steps and the evaluator with libtraceevent's helpers and printf
//! conversions (second half) share private types (`Expr`, `Piece`, `Step`,
//! `CType`) whose invariants the parser sets and the renderer relies on; split
//! across files they would all become visible to the rest of the crate. Read it
//! top to bottom: tokens → `Parser` → `compile` → `PrintFmt::write` → `eval`
//! and the conversions.

use crate::format::{EventFormat, Field, FieldLayout, read_uint};
use crate::text::{Text, push_prefix, rest_from};

/// What the evaluator needs from the file: symbols and kernel strings.
pub(crate) trait Kernel {
    /// `(name, offset of addr in it)` of the symbol containing `addr`.
    fn symbol(&self, addr: u64) -> Option<(&str, u64)>;
    /// The string the kernel keeps at `addr` (printk formats section).
    fn kernel_string(&self, addr: u64) -> Option<&str>;
    /// The address of the symbol named `name` (kallsyms), the lowest where
    /// several share the name.
    fn symbol_address(&self, name: &str) -> Option<u64>;
    /// Bytes in a `long` of the traced kernel.
    fn long_size(&self) -> usize;
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Num(u64),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 30] = [
    "->", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||", "(", ")", "[", "]", "{", "}", ",", "?",
    ":", "+", "-", "*", "/", "%", "&", "|", "^", "!", "~", "<", ">",
];

fn unescape(s: &str, out: &mut String) {
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('\'') => out.push('\''),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let q = c;
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' {
                    i += 1;
                } else if !matches!(b[i], b' '..=b'~' | b'\n') {
                    // libtraceevent 1.7.1 ends a quoted string at a byte
                    // that is not printable (a literal tab, as in
                    // maple_tree's formats) and fails on the rest: trace-cmd
                    // prints such events as [FAILED TO PARSE].
                    return Err(format!("byte 0x{:02x} inside a quoted string", b[i]));
                }
                i += 1;
            }
            let raw = s.get(start..i.min(b.len())).ok_or("bad string")?;
            i += 1;
            let mut t = String::new();
            unescape(raw, &mut t);
            if q == b'\'' {
                v.push(Tok::Num(t.chars().next().map_or(0, |c| c as u64)));
            } else if let Some(Tok::Str(prev)) = v.last_mut() {
                prev.push_str(&t);
            } else {
                v.push(Tok::Str(t));
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let t = s[start..i].trim_end_matches(['u', 'U', 'l', 'L']);
            let n = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(h, 16)
            } else if t.len() > 1 && t.starts_with('0') {
                u64::from_str_radix(&t[1..], 8)
            } else {
                t.parse()
            }
            .map_err(|_| format!("bad number `{t}`"))?;
            v.push(Tok::Num(n));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push(Tok::Ident(s[start..i].to_string()));
        } else {
            let p = PUNCTS
                .iter()
                .find(|p| s[i..].starts_with(**p))
                .ok_or_else(|| format!("unexpected `{}`", c as char))?;
            v.push(Tok::Punct(p));
            i += p.len();
        }
    }
    Ok(v)
}

/// A C type named in a cast or `sizeof`: size in bytes and signedness.
#[derive(Debug, Clone, Copy)]
struct CType {
    size: usize,
    /// What a cast to this type keeps of a value, as libtraceevent casts:
    /// only `u8 u16 u32 s8 s16 s32` and `[unsigned] char short int` spelled
    /// exactly so cut the value (never sign-extending); other types keep
    /// all 64 bits.
    mask: u64,
    pointer: bool,
}

#[derive(Debug, Clone)]
enum Expr {
    Num(i64),
    /// A name the kernel left unresolved (an enum constant): 0 in
    /// arithmetic.
    Unknown(String),
    Str(String),
    /// A field (index into fields then common fields) and, for arrays, the
    /// element size, both resolved when the format is parsed.
    Field(usize, usize),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(CType, Box<Expr>),
    Index(Box<Expr>, Box<Expr>),
    /// `__get_str(f)`, `__get_dynamic_array(f)`: field and element size.
    Data(usize, usize),
    DataLen(usize),
    /// `__get_bitmask(f)` (`false`: hex words) or `__get_cpumask(f)`
    /// (`true`: a CPU list).
    Bitmask(usize, bool),
    /// Entries are `(value, name)`; value `None` when it names something
    /// the kernel left unresolved.
    Symbolic(Box<Expr>, Vec<(Option<i64>, String)>),
    Flags(Box<Expr>, String, Vec<(Option<i64>, String)>),
    Hex(Box<Expr>, Box<Expr>, bool),
    Array(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// A value during evaluation.
#[derive(Debug, Clone)]
enum Val<'d> {
    Num(i64),
    /// Raw bytes (a char array, a dynamic array, a string constant).
    Bytes(&'d [u8], usize),
    Text(String),
    /// Text in pieces, `true` for those the conversion's width pads.
    Pieces(Vec<(String, bool)>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Len {
    None,
    H,
    Hh,
    L,
    Ll,
    Z,
}

#[derive(Debug, Clone)]
struct Conv {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Option<usize>,
    width_arg: bool,
    prec: Option<usize>,
    prec_arg: bool,
    len: Len,
    kind: u8,
    /// For `%p`: the extension letters (`S`, `s`, `I4`, `M`, ...).
    ext: String,
}

#[derive(Debug, Clone)]
enum Piece {
    Lit(String),
    Conv(Conv),
}

/// A scalar at a fixed place of every record: an inline field, or one
/// element of an inline array indexed by a constant, under any casts.
/// Resolved when the format is parsed.
#[derive(Debug, Clone, Copy)]
struct Fixed {
    at: usize,
    /// 1, 2, 4 or 8.
    size: usize,
    /// What the casts around it keep of the value ([`CType::mask`]; all
    /// ones without a cast).
    mask: u64,
}

impl Fixed {
    /// The value as [`eval`] gives it: unsigned, cast, 0 when the record is
    /// too short.
    #[inline]
    fn read(self, data: &[u8], big: bool) -> i64 {
        let v = self
            .at
            .checked_add(self.size)
            .and_then(|end| data.get(self.at..end))
            .and_then(|b| read_uint(b, big))
            .unwrap_or(0);
        (v & self.mask) as i64
    }
}

/// One step of a compiled `print fmt`.
#[derive(Debug, Clone)]
enum Step {
    /// Text copied as it is.
    Lit(Text),
    /// An integer conversion (`%d %u %x %X %o` with flags, width, precision)
    /// of a [`Fixed`] scalar; `size` is the conversion's integer size and
    /// `plain` says it has no flag, width or precision.
    Int {
        src: Fixed,
        conv: Conv,
        size: usize,
        plain: bool,
    },
    /// `%s` of a field holding characters (an inline array or a dynamic
    /// one); `arg` is the argument, evaluated in full only when the record is
    /// too short for the field.
    Str {
        field: usize,
        conv: Conv,
        arg: usize,
    },
    /// `%s` of an inline scalar field (a `const char *` the kernel stored):
    /// as libtraceevent prints it, the printk string at that address (else
    /// the address in hex) when the field is a kernel long, read in this
    /// machine's byte order as libtraceevent reads it, else the field's own
    /// bytes as text.
    StrScalar { field: usize, conv: Conv },
    /// `%*ph` (`C`, `D`, `N`: `:`, `-` or no separator, else a space):
    /// the first `*` bytes of a dynamic array in hex; libtraceevent prints
    /// `ARG TYPE NOT FIELD BUT 2` for an inline field, and one byte without
    /// the `*`.
    RawBuf {
        conv: Conv,
        arg: usize,
        dynamic: bool,
    },
    /// Any other conversion: its arguments (`*` width, `*` precision, value)
    /// start at `arg` and are evaluated.
    Conv { conv: Conv, arg: usize },
}

/// A `print fmt` compiled into [`Step`]s; [`PrintFmt::write`] runs them
/// for each record.
#[derive(Debug, Clone)]
pub(crate) struct PrintFmt {
    steps: Vec<Step>,
    args: Vec<Expr>,
}

/// The [`Fixed`] scalar `e` reads, if it is one.
fn fixed(fmt: &EventFormat, e: &Expr) -> Option<Fixed> {
    let sized = |n: usize| matches!(n, 1 | 2 | 4 | 8);
    match e {
        Expr::Field(i, _) => {
            let f = field_at(fmt, *i);
            (f.layout == FieldLayout::Inline && f.array_len.is_none() && sized(f.size)).then_some(
                Fixed {
                    at: f.offset,
                    size: f.size,
                    mask: u64::MAX,
                },
            )
        }
        // A cast of a number masks it (see `eval`), whatever its type.
        Expr::Cast(t, a) => fixed(fmt, a).map(|f| Fixed {
            mask: f.mask & t.mask,
            ..f
        }),
        Expr::Index(a, k) => {
            let (Expr::Field(i, es), Expr::Num(k)) = (a.as_ref(), k.as_ref()) else {
                return None;
            };
            let f = field_at(fmt, *i);
            let k = usize::try_from(*k).ok()?;
            let start = k.checked_mul(*es)?;
            let inside = start.checked_add(*es)? <= f.size;
            (f.layout == FieldLayout::Inline && f.array_len.is_some() && sized(*es) && inside)
                .then_some(Fixed {
                    at: f.offset.checked_add(start)?,
                    size: *es,
                    mask: u64::MAX,
                })
        }
        _ => None,
    }
}

/// The field `e` names when `%s` of it prints the field's characters.
fn char_field(fmt: &EventFormat, e: &Expr) -> Option<usize> {
    match e {
        Expr::Field(i, _) => {
            let f = field_at(fmt, *i);
            (f.array_len.is_some() || f.layout != FieldLayout::Inline).then_some(*i)
        }
        Expr::Data(i, _) => Some(*i),
        _ => None,
    }
}

fn compile(fmt: &EventFormat, c: Conv, args: &[Expr], arg: usize) -> Step {
    if c.kind == b'p' && c.ext.starts_with('h') && !c.prec_arg {
        let e = &args[arg + c.width_arg as usize];
        return Step::RawBuf {
            dynamic: matches!(e, Expr::Data(..)),
            conv: c,
            arg,
        };
    }
    if !c.width_arg && !c.prec_arg {
        let e = &args[arg];
        if c.kind == b's'
            && let Expr::Field(i, _) = e
            && field_at(fmt, *i).layout == FieldLayout::Inline
            && field_at(fmt, *i).array_len.is_none()
        {
            return Step::StrScalar { field: *i, conv: c };
        }
        if matches!(c.kind, b'd' | b'i' | b'u' | b'x' | b'X' | b'o')
            && let Some(src) = fixed(fmt, e)
        {
            let plain = !(c.left || c.zero || c.plus || c.space || c.alt)
                && c.width.is_none()
                && c.prec.is_none();
            return Step::Int {
                src,
                size: int_size(&c, HOST_LONG),
                plain,
                conv: c,
            };
        }
        if c.kind == b's'
            && let Some(field) = char_field(fmt, e)
        {
            return Step::Str {
                field,
                conv: c,
                arg,
            };
        }
    }
    Step::Conv { conv: c, arg }
}

fn parse_printf(f: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let b = f.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            let ch = f[i..].chars().next().unwrap_or('?');
            lit.push(ch);
            i += ch.len_utf8();
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'%') {
            lit.push('%');
            i += 1;
            continue;
        }
        let mut c = Conv {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: None,
            width_arg: false,
            prec: None,
            prec_arg: false,
            len: Len::None,
            kind: 0,
            ext: String::new(),
        };
        while let Some(&ch) = b.get(i) {
            match ch {
                b'-' => c.left = true,
                b'0' => c.zero = true,
                b'+' => c.plus = true,
                b' ' => c.space = true,
                b'#' => c.alt = true,
                _ => break,
            }
            i += 1;
        }
        let num = |i: &mut usize| {
            let s = *i;
            while b.get(*i).is_some_and(|c| c.is_ascii_digit()) {
                *i += 1;
            }
            f[s..*i].parse::<usize>().ok()
        };
        if b.get(i) == Some(&b'*') {
            c.width_arg = true;
            i += 1;
        } else {
            c.width = num(&mut i);
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if b.get(i) == Some(&b'*') {
                c.prec_arg = true;
                i += 1;
            } else {
                c.prec = Some(num(&mut i).unwrap_or(0));
            }
        }
        loop {
            match b.get(i) {
                Some(b'h') => c.len = if c.len == Len::H { Len::Hh } else { Len::H },
                Some(b'l') | Some(b'L') | Some(b'q') => {
                    c.len = if c.len == Len::L { Len::Ll } else { Len::L }
                }
                Some(b'z') | Some(b'Z') | Some(b't') | Some(b'j') => c.len = Len::Z,
                _ => break,
            }
            i += 1;
        }
        let Some(&k) = b.get(i) else {
            return Err("conversion at end of format".into());
        };
        i += 1;
        if !b"diouxXcsp".contains(&k) {
            return Err(format!("unsupported conversion `%{}`", k as char));
        }
        c.kind = k;
        if k == b'p' {
            while let Some(&ch) = b.get(i) {
                if ch.is_ascii_alphanumeric() {
                    c.ext.push(ch as char);
                    i += 1;
                } else {
                    break;
                }
            }
            // Only letters we know are taken as an extension; the kernel
            // stops at the first one it does not know.
            let known = [
                "S", "s", "F", "f", "B", "SR", "I4", "i4", "I6", "i6", "I6c", "IS", "iS", "ISp",
                "iSp", "ISc", "iSc", "ISpc", "iSpc", "M", "m", "MR", "U", "Ub", "UB", "Ul", "UL",
                "K", "x", "h", "hC", "hD", "hN",
            ];
            if !c.ext.is_empty() && !known.contains(&c.ext.as_str()) {
                let mut best = "";
                for k in known {
                    if c.ext.starts_with(k) && k.len() > best.len() {
                        best = k;
                    }
                }
                let rest = c.ext[best.len()..].to_string();
                i -= rest.len();
                c.ext = best.to_string();
            }
        }
        if !lit.is_empty() {
            out.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        out.push(Piece::Conv(c));
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    Ok(out)
}

struct Parser<'f> {
    toks: Vec<Tok>,
    pos: usize,
    fmt: &'f EventFormat,
    long: usize,
    /// Levels of the expression tree being built above the current token
    /// (see [`MAX_DEPTH`]).
    depth: usize,
}

/// The deepest expression tree a print fmt may build: every nested
/// expression, operand of a unary operator or cast, binary operator of a
/// chain and `[index]` counts one level. The real kernels' formats of the
/// corpus (tests/corpus) all parse with a bound of 40; a hostile one nesting 100,000 parentheses
/// or minus signs would overflow the stack of the parser, the evaluator or
/// the tree's destructor, so past this depth parsing fails and the event is
/// printed as trace-cmd prints one it cannot parse.
pub(crate) const MAX_DEPTH: usize = 256;

/// An operator's rank as libtraceevent 1.7.1 ranks it (`get_op_prio`: a
/// lower rank binds tighter; `?` is 16), or `None` for a token that does not
/// continue an expression.
fn tep_prio(p: &str) -> Option<u8> {
    Some(match p {
        "*" | "/" | "%" => 6,
        "+" | "-" => 7,
        "<<" | ">>" => 8,
        "<" | ">" | "<=" | ">=" => 9,
        "==" | "!=" => 10,
        "&" => 11,
        "^" => 12,
        "|" => 13,
        "&&" => 14,
        "||" => 15,
        "?" => 16,
        _ => return None,
    })
}

/// The rank libtraceevent gives a node it built: a binary operator's own, 0
/// for a conditional.
fn node_prio(e: &Expr) -> u8 {
    match e {
        Expr::Binary(op, ..) => tep_prio(op).unwrap_or(0),
        _ => 0,
    }
}

const TYPE_WORDS: [&str; 22] = [
    "unsigned", "signed", "char", "short", "int", "long", "u8", "u16", "u32", "u64", "s8", "s16",
    "s32", "s64", "bool", "size_t", "pid_t", "const", "void", "__u8", "__u16", "__u32",
];

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Punct(q)) if *q == p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            Ok(())
        } else {
            Err(format!("expected `{p}`, found {:?}", self.peek()))
        }
    }

    fn field(&self, name: &str) -> Result<usize, String> {
        self.fmt
            .fields
            .iter()
            .chain(self.fmt.common_fields.iter())
            .position(|f| f.name == name)
            .ok_or_else(|| format!("no field `{name}`"))
    }

    /// The element size of field `i` when it is an array: from its declared
    /// length, else from its element type; 1 when neither says.
    fn elem_size(&self, i: usize) -> usize {
        let f = field_at(self.fmt, i);
        match f.array_len {
            Some(n) if n > 0 && f.size.is_multiple_of(n) => f.size / n,
            _ => {
                let t = f
                    .type_name
                    .trim_start_matches("__data_loc ")
                    .trim_start_matches("__rel_loc ")
                    .trim_end_matches("[]");
                let mut p = Parser {
                    toks: tokenize(t).unwrap_or_default(),
                    pos: 0,
                    fmt: self.fmt,
                    long: self.long,
                    depth: 0,
                };
                p.ctype().map(|c| c.size).unwrap_or(1)
            }
        }
    }

    fn is_type_start(&self) -> bool {
        match self.peek() {
            Some(Tok::Ident(w)) => {
                TYPE_WORDS.contains(&w.as_str())
                    || w.starts_with("__s")
                    || w.starts_with("__u")
                    || w.ends_with("_t")
                    || matches!(w.as_str(), "struct" | "enum" | "gfp_t" | "bool")
            }
            _ => false,
        }
    }

    /// Whether a `(` just read opens a cast to a type not in our word list:
    /// `(NAME)` followed by something an operand starts with, e.g.
    /// `(uint)(REC->lsn)` (libtraceevent takes any such parenthesized name as
    /// a type).
    fn is_named_cast(&self) -> bool {
        matches!(
            (self.peek(), self.toks.get(self.pos + 1), self.toks.get(self.pos + 2)),
            (
                Some(Tok::Ident(w)),
                Some(Tok::Punct(")")),
                Some(Tok::Ident(_) | Tok::Num(_) | Tok::Punct("(")),
            ) if w != "REC"
        )
    }

    /// Parses a type name up to (not including) the closing `)`.
    fn ctype(&mut self) -> Result<CType, String> {
        let mut words = Vec::new();
        let mut pointer = false;
        loop {
            match self.peek() {
                Some(Tok::Ident(w)) => {
                    words.push(w.clone());
                    self.pos += 1;
                }
                Some(Tok::Punct("*")) => {
                    pointer = true;
                    self.pos += 1;
                }
                _ => break,
            }
        }
        let spelled = words.join(" ");
        let mask = if pointer || spelled.starts_with("struct") {
            u64::MAX
        } else {
            match spelled.strip_prefix("unsigned ").unwrap_or(&spelled) {
                "u8" | "s8" | "char" => 0xff,
                "u16" | "s16" | "short" => 0xffff,
                "u32" | "s32" | "int" => 0xffff_ffff,
                _ => u64::MAX,
            }
        };
        let words: Vec<&str> = words
            .iter()
            .map(|s| s.as_str())
            .filter(|w| !matches!(*w, "const" | "volatile" | "struct" | "enum"))
            .collect();
        let has = |w: &str| words.contains(&w);
        let long = self.long;
        let size = if pointer {
            long
        } else if has("char") {
            1
        } else if has("short") {
            2
        } else if words.iter().filter(|w| **w == "long").count() >= 2 {
            8
        } else if has("long") {
            long
        } else if has("int") || has("signed") || has("unsigned") {
            4
        } else if let Some(w) = words.last() {
            let w = w.trim_start_matches("__");
            match w {
                "u8" | "bool" => 1,
                "s8" => 1,
                "u16" => 2,
                "s16" => 2,
                "u32" | "gfp_t" => 4,
                "s32" | "pid_t" => 4,
                "u64" => 8,
                "s64" | "loff_t" => 8,
                "size_t" => long,
                "ssize_t" => long,
                _ => 8,
            }
        } else {
            return Err("empty type".into());
        };
        Ok(CType {
            size,
            mask,
            pointer,
        })
    }

    /// One level deeper into the tree; an error past [`MAX_DEPTH`]. Every
    /// call is paired with a `self.depth -= 1` when the level is done (an
    /// error ends the parse, so its levels are never given back).
    fn deeper(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("the arguments nest deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    /// An expression as libtraceevent 1.7.1 builds it (`process_arg` then
    /// `process_op`), so that it evaluates to what trace-cmd 3.1.6 prints
    /// rather than to C's value where the two differ: see [`Self::tep_op`].
    /// Stops before `:`, `,`, `)` and `]`.
    fn expr(&mut self) -> Result<Expr, String> {
        self.deeper()?;
        let mut e = self.unary()?;
        while let Some(op) = self.next_op() {
            self.tep_op(&mut e, op)?;
        }
        self.depth -= 1;
        Ok(e)
    }

    /// The next token when it continues an expression (a binary operator
    /// or `?`), consumed.
    fn next_op(&mut self) -> Option<&'static str> {
        let Some(Tok::Punct(p)) = self.peek() else {
            return None;
        };
        let p: &'static str = p;
        tep_prio(p)?;
        self.pos += 1;
        Some(p)
    }

    /// libtraceevent's `process_op`: `arg` (the expression so far) becomes
    /// the left side of `op`, and the operand after `op` its right side.
    /// Where libtraceevent departs from C, so does this:
    /// * an operand that is itself an operator node looser than `op` (a
    ///   parenthesised `b | c`, or `b ? c : d`) is rotated above `op`:
    ///   `a & (b | c)` is built as `(a & b) | c`;
    /// * a following operator that is not looser than the node just built
    ///   extends the node's right side (its left after a rotation), and
    ///   never returns to the levels above: `a - b + c` is `a - (b + c)`;
    /// * `c ? t : e` takes one operand as `e`: `x ? a : y == 1 ? b : c` is
    ///   `((x ? a : y) == 1) ? b : c`.
    fn tep_op(&mut self, arg: &mut Expr, op: &'static str) -> Result<(), String> {
        self.deeper()?;
        let left = Box::new(std::mem::replace(arg, Expr::Num(0)));
        // Which child the operators that follow may extend: the right one,
        // or after a rotation the left one.
        let mut into_left = false;
        if op == "?" {
            let then = self.expr()?;
            self.expect(":")?;
            let other = self.unary()?;
            *arg = Expr::Cond(left, Box::new(then), Box::new(other));
        } else {
            let right = self.unary()?;
            let rank = tep_prio(op).unwrap_or(0);
            *arg = match right {
                Expr::Binary(rop, rl, rr) if rank < tep_prio(rop).unwrap_or(0) => {
                    into_left = true;
                    Expr::Binary(rop, Box::new(Expr::Binary(op, left, rl)), rr)
                }
                Expr::Cond(c, t, e) if rank < 16 => {
                    into_left = true;
                    Expr::Cond(Box::new(Expr::Binary(op, left, c)), t, e)
                }
                right => Expr::Binary(op, left, Box::new(right)),
            };
        }
        if let Some(next) = self.next_op() {
            // A conditional ranks 0: whatever follows takes it whole.
            if tep_prio(next) > Some(node_prio(arg)) {
                self.tep_op(arg, next)?;
            } else {
                let slot: &mut Expr = match arg {
                    Expr::Binary(_, l, _) if into_left => l,
                    Expr::Binary(_, _, r) => r,
                    other => other,
                };
                self.tep_op(slot, next)?;
            }
        }
        self.depth -= 1;
        Ok(())
    }

    fn unary(&mut self) -> Result<Expr, String> {
        self.deeper()?;
        let e = self.unary_here()?;
        self.depth -= 1;
        Ok(e)
    }

    fn unary_here(&mut self) -> Result<Expr, String> {
        // libtraceevent 1.7.1 takes `-`, `!`, `~` and `+` before an operand
        // and fails on any other (`&REC->uuid` of the cxl events): trace-cmd
        // prints such events as [FAILED TO PARSE].
        for op in ["&", "*"] {
            if self.eat(op) {
                return Err(format!("unary `{op}`: libtraceevent cannot parse it"));
            }
        }
        for op in ["-", "!", "~", "+"] {
            if self.eat(op) {
                let e = self.unary()?;
                return Ok(match op {
                    "+" => e,
                    _ => Expr::Unary(op_static(op), Box::new(e)),
                });
            }
        }
        if matches!(self.peek(), Some(Tok::Punct("("))) {
            self.pos += 1;
            if self.is_type_start() || self.is_named_cast() {
                let t = self.ctype()?;
                self.expect(")")?;
                let e = self.unary()?;
                return Ok(Expr::Cast(t, Box::new(e)));
            }
            let e = self.expr()?;
            self.expect(")")?;
            return self.postfix(e);
        }
        let e = self.primary()?;
        self.postfix(e)
    }

    /// `[index]` suffixes: each wraps the expression one level deeper.
    fn postfix(&mut self, mut e: Expr) -> Result<Expr, String> {
        let mut levels = 0;
        while self.eat("[") {
            self.deeper()?;
            levels += 1;
            let i = self.expr()?;
            self.expect("]")?;
            e = Expr::Index(Box::new(e), Box::new(i));
        }
        self.depth -= levels;
        Ok(e)
    }

    /// What `sizeof(...)` may hold for libtraceevent 1.7.1
    /// (`process_sizeof`): `int`, `unsigned [int]`, `[unsigned] long [long]`
    /// and `REC->field` of a field that is not an array. Anything else
    /// (`u64`, `struct page`, `char`) makes trace-cmd 3.1.6 print the
    /// event as `[FAILED TO PARSE]`, and so an error here.
    fn sizeof(&mut self) -> Result<usize, String> {
        let word = |t: Option<&Tok>| match t {
            Some(Tok::Ident(w)) => Some(w.clone()),
            _ => None,
        };
        let mut w = word(self.peek()).ok_or("sizeof of something that is not a name")?;
        self.pos += 1;
        if w == "unsigned" {
            match word(self.peek()) {
                Some(next) => {
                    self.pos += 1;
                    w = next;
                }
                None => return Ok(4),
            }
        }
        match w.as_str() {
            "int" => Ok(4),
            "long" => {
                if word(self.peek()).as_deref() == Some("long") {
                    self.pos += 1;
                    Ok(8)
                } else {
                    Ok(self.long)
                }
            }
            "REC" if self.eat("->") => {
                let name = word(self.peek()).ok_or("sizeof(REC->) without a field")?;
                self.pos += 1;
                let f = field_at(self.fmt, self.field(&name)?);
                if f.array_len.is_some() || f.layout != FieldLayout::Inline {
                    return Err(format!("sizeof of the array field `{name}`"));
                }
                Ok(f.size)
            }
            _ => Err(format!("sizeof({w} ...): libtraceevent knows no such size")),
        }
    }

    fn field_arg(&mut self) -> Result<usize, String> {
        self.expect("(")?;
        let name = match (self.next(), self.peek()) {
            (Some(Tok::Ident(r)), Some(Tok::Punct("->"))) if r == "REC" => {
                self.pos += 1;
                match self.next() {
                    Some(Tok::Ident(n)) => n,
                    t => return Err(format!("expected a field after REC->, found {t:?}")),
                }
            }
            (Some(Tok::Ident(n)), _) => n,
            (t, _) => return Err(format!("expected a field name, found {t:?}")),
        };
        self.expect(")")?;
        self.field(&name)
    }

    /// The `{ value, "name" }` entries of `__print_symbolic` /
    /// `__print_flags`. A value naming something the file does not define
    /// (an enum constant the kernel did not resolve) is kept as `None`
    /// (libtraceevent takes it as -1), and a `{ value, NULL }` terminator is
    /// dropped.
    fn pairs(&mut self) -> Result<Vec<(Option<i64>, String)>, String> {
        let mut v = Vec::new();
        while self.eat(",") {
            self.expect("{")?;
            let e = self.expr()?;
            let n = flag_value(&e);
            self.expect(",")?;
            let s = match self.peek() {
                Some(Tok::Str(s)) => {
                    let s = s.clone();
                    self.pos += 1;
                    Some(s)
                }
                _ => {
                    self.expr()?;
                    None
                }
            };
            self.expect("}")?;
            if let Some(s) = s {
                v.push((n, s));
            }
        }
        Ok(v)
    }

    fn primary(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Tok::Num(n)) => Ok(Expr::Num(n as i64)),
            Some(Tok::Str(s)) => Ok(Expr::Str(s)),
            Some(Tok::Ident(w)) => match w.as_str() {
                "REC" => {
                    self.expect("->")?;
                    match self.next() {
                        Some(Tok::Ident(n)) => {
                            let i = self.field(&n)?;
                            Ok(Expr::Field(i, self.elem_size(i)))
                        }
                        t => Err(format!("expected a field after REC->, found {t:?}")),
                    }
                }
                "__get_str"
                | "__get_dynamic_array"
                | "__get_rel_str"
                | "__get_rel_dynamic_array" => {
                    let i = self.field_arg()?;
                    Ok(Expr::Data(i, self.elem_size(i)))
                }
                "__get_dynamic_array_len" | "__get_rel_dynamic_array_len" => {
                    Ok(Expr::DataLen(self.field_arg()?))
                }
                "__get_bitmask" | "__get_rel_bitmask" => {
                    Ok(Expr::Bitmask(self.field_arg()?, false))
                }
                "__get_cpumask" | "__get_rel_cpumask" => Ok(Expr::Bitmask(self.field_arg()?, true)),
                "__print_symbolic" | "__print_symbolic_u64" => {
                    self.expect("(")?;
                    let v = self.expr()?;
                    let p = self.pairs()?;
                    self.expect(")")?;
                    Ok(Expr::Symbolic(Box::new(v), p))
                }
                "__print_flags" | "__print_flags_u64" => {
                    self.expect("(")?;
                    let v = self.expr()?;
                    self.expect(",")?;
                    let d = match self.next() {
                        Some(Tok::Str(s)) => s,
                        t => return Err(format!("expected a delimiter, found {t:?}")),
                    };
                    let p = self.pairs()?;
                    self.expect(")")?;
                    Ok(Expr::Flags(Box::new(v), d, p))
                }
                "__print_hex" | "__print_hex_str" => {
                    self.expect("(")?;
                    let a = self.expr()?;
                    self.expect(",")?;
                    let n = self.expr()?;
                    self.expect(")")?;
                    Ok(Expr::Hex(Box::new(a), Box::new(n), w == "__print_hex_str"))
                }
                "__print_array" => {
                    self.expect("(")?;
                    let a = self.expr()?;
                    self.expect(",")?;
                    let n = self.expr()?;
                    self.expect(",")?;
                    let s = self.expr()?;
                    self.expect(")")?;
                    Ok(Expr::Array(Box::new(a), Box::new(n), Box::new(s)))
                }
                "sizeof" => {
                    self.expect("(")?;
                    let size = self.sizeof()?;
                    self.expect(")")?;
                    Ok(Expr::Num(size as i64))
                }
                // trace-cmd's jbd2 plugin defines `jiffies_to_msecs(x)` as `x`.
                "jiffies_to_msecs" => {
                    self.expect("(")?;
                    let e = self.expr()?;
                    self.expect(")")?;
                    Ok(e)
                }
                // `__builtin_expect(x, hint)` is `x`.
                "__builtin_expect" => {
                    self.expect("(")?;
                    let e = self.expr()?;
                    self.expect(",")?;
                    self.expr()?;
                    self.expect(")")?;
                    Ok(e)
                }
                "true" => Ok(Expr::Num(1)),
                "false" | "NULL" => Ok(Expr::Num(0)),
                _ if matches!(self.peek(), Some(Tok::Punct("("))) => {
                    Err(format!("cannot evaluate `{w}(...)`"))
                }
                // A constant the kernel left unresolved: 0 in arithmetic,
                // never equal to a value in a symbol table.
                _ => Ok(Expr::Unknown(w)),
            },
            t => Err(format!("unexpected {t:?}")),
        }
    }
}

fn op_static(op: &str) -> &'static str {
    match op {
        "-" => "-",
        "!" => "!",
        _ => "~",
    }
}

/// Names libtraceevent knows the value of when a symbol or flag table
/// names them instead of giving a number (kernels that did not resolve
/// these enums).
const KNOWN_NAMES: [(&str, i64); 12] = [
    ("HI_SOFTIRQ", 0),
    ("TIMER_SOFTIRQ", 1),
    ("NET_TX_SOFTIRQ", 2),
    ("NET_RX_SOFTIRQ", 3),
    ("BLOCK_SOFTIRQ", 4),
    ("IRQ_POLL_SOFTIRQ", 5),
    ("TASKLET_SOFTIRQ", 6),
    ("SCHED_SOFTIRQ", 7),
    ("HRTIMER_SOFTIRQ", 8),
    ("RCU_SOFTIRQ", 9),
    ("HRTIMER_NORESTART", 0),
    ("HRTIMER_RESTART", 1),
];

/// The value of a `__print_symbolic` / `__print_flags` entry as
/// libtraceevent takes it; `None` stands for its -1 (all ones). A number is
/// itself; a name is its [`KNOWN_NAMES`] value, else -1; an expression is
/// computed with unresolved names as 0, and a negative result is -1 (it
/// prints the result in decimal and reads back only what starts with a
/// digit). Casts around an entry are ignored.
fn flag_value(e: &Expr) -> Option<i64> {
    match e {
        Expr::Cast(_, a) => flag_value(a),
        Expr::Num(n) => Some(*n),
        Expr::Unknown(name) => KNOWN_NAMES.iter().find(|(k, _)| k == name).map(|(_, v)| *v),
        _ => const_eval(e).filter(|v| *v >= 0),
    }
}

/// A constant expression's value, unresolved names counting as 0; `None`
/// when it reads the record.
fn const_eval(e: &Expr) -> Option<i64> {
    match e {
        Expr::Num(n) => Some(*n),
        Expr::Unknown(_) => Some(0),
        Expr::Unary(op, a) => {
            let a = const_eval(a)?;
            Some(match *op {
                "-" => a.wrapping_neg(),
                "!" => (a == 0) as i64,
                _ => !a,
            })
        }
        Expr::Binary(op, a, b) => Some(binop(op, const_eval(a)?, const_eval(b)?)),
        Expr::Cast(t, a) => Some(cast(*t, const_eval(a)?)),
        _ => None,
    }
}

/// A binary operator as libtraceevent computes it: on unsigned 64-bit
/// values (comparisons, division and shifts included); division by zero
/// gives 0.
fn binop(op: &str, a: i64, b: i64) -> i64 {
    match op {
        "+" => a.wrapping_add(b),
        "-" => a.wrapping_sub(b),
        "*" => a.wrapping_mul(b),
        "/" => (a as u64).checked_div(b as u64).unwrap_or(0) as i64,
        "%" => (a as u64).checked_rem(b as u64).unwrap_or(0) as i64,
        "&" => a & b,
        "|" => a | b,
        "^" => a ^ b,
        "<<" => a.wrapping_shl(b as u32),
        ">>" => ((a as u64).wrapping_shr(b as u32)) as i64,
        "==" => (a == b) as i64,
        "!=" => (a != b) as i64,
        "<" => ((a as u64) < (b as u64)) as i64,
        ">" => ((a as u64) > (b as u64)) as i64,
        "<=" => ((a as u64) <= (b as u64)) as i64,
        ">=" => ((a as u64) >= (b as u64)) as i64,
        "&&" => (a != 0 && b != 0) as i64,
        _ => (a != 0 || b != 0) as i64,
    }
}

/// `v` cast to `t` as libtraceevent casts (see [`CType::mask`]).
fn cast(t: CType, v: i64) -> i64 {
    ((v as u64) & t.mask) as i64
}

/// The low `size` bytes of `v` as a signed number: how C's printf sees an
/// argument passed as `char`, `short`, `int` or a 64-bit `long`.
fn sign_extend(v: i64, size: usize) -> i64 {
    match size {
        1 => v as i8 as i64,
        2 => v as i16 as i64,
        4 => v as i32 as i64,
        _ => v,
    }
}

fn field_at(fmt: &EventFormat, i: usize) -> &Field {
    let n = fmt.fields.len();
    if i < n {
        &fmt.fields[i]
    } else {
        &fmt.common_fields[i - n]
    }
}

/// Record data plus what evaluation needs.
pub(crate) struct Ctx<'d, K: Kernel> {
    pub(crate) fmt: &'d EventFormat,
    pub(crate) data: &'d [u8],
    pub(crate) big: bool,
    pub(crate) kernel: &'d K,
}

/// The printf pieces of `fmt`'s print fmt and its argument expressions,
/// checked to be enough for the pieces.
fn parse_parts(fmt: &EventFormat, long: usize) -> Result<(Vec<Piece>, Vec<Expr>), String> {
    let toks = tokenize(&fmt.print_fmt)?;
    let mut p = Parser {
        toks,
        pos: 0,
        fmt,
        long,
        depth: 0,
    };
    let f = match p.next() {
        Some(Tok::Str(s)) => s,
        t => return Err(format!("print fmt does not start with a string: {t:?}")),
    };
    let pieces = parse_printf(&f)?;
    let mut args = Vec::new();
    while p.eat(",") {
        args.push(p.expr()?);
    }
    if p.pos < p.toks.len() {
        return Err(format!("unexpected {:?} after the arguments", p.peek()));
    }
    let needed: usize = pieces
        .iter()
        .map(|pc| match pc {
            Piece::Conv(c) => 1 + c.width_arg as usize + c.prec_arg as usize,
            Piece::Lit(_) => 0,
        })
        .sum();
    if needed > args.len() {
        return Err(format!(
            "format takes {needed} arguments, {} given",
            args.len()
        ));
    }
    Ok((pieces, args))
}

/// How an event's `print fmt` shows one of its fields, when it shows it as
/// a name rather than as a number ([`shown_fields`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// `%s` of a character field: text.
    Text,
    /// `__print_symbolic(REC->f, { value, "NAME" }, ...)`: the entries
    /// whose value the file resolves, in the order given.
    Symbolic(Vec<(i64, String)>),
    /// `%pS %ps %pF %pf %pB` of the field: a kernel address, shown as the
    /// symbol it falls in.
    Symbol,
}

/// The fields `fmt`'s print fmt shows as names, in the order it prints
/// them, each once (its first way of being shown); empty when the print fmt
/// cannot be parsed. A field reached through casts or one branch of a
/// ternary (`REC->state ? __print_symbolic(REC->state, ...) : "UNKNOWN"`)
/// counts.
pub fn shown_fields(fmt: &EventFormat) -> Vec<(String, Shown)> {
    let Ok((pieces, args)) = parse_parts(fmt, 8) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Shown)> = Vec::new();
    let mut ai = 0;
    for pc in pieces {
        let Piece::Conv(c) = pc else { continue };
        let value = ai + c.width_arg as usize + c.prec_arg as usize;
        ai = value + 1;
        if let Some(e) = args.get(value) {
            shown_in(fmt, &c, e, &mut out);
        }
    }
    out
}

/// How an event's `print fmt` shows one integer field by itself, when it
/// shows it only as text: the `%s` conversions whose argument reads that
/// field and no other (a `__print_symbolic`, a `__print_flags`, a ternary
/// of strings), run in order on a value. So sched_switch's `prev_state`
/// reads `S`, `D`, `I`, `R`, `R+` as the kernel's own listing prints it
/// (`prev_state=%s%s`), a page allocation's `gfp_flags`
/// `GFP_KERNEL|__GFP_ZERO`. [`FieldText::of`] gives `None` for a field the
/// print fmt shows as a number (also where it shows a name beside it, as
/// softirq's `vec=%u [action=%s]`), a string, or not at all.
#[derive(Debug, Clone)]
pub struct FieldText {
    fmt: EventFormat,
    field: Field,
    print: PrintFmt,
}

/// A [`Kernel`] with no symbols and no strings: a field's text needs
/// neither.
struct NoKernel;

impl Kernel for NoKernel {
    fn symbol(&self, _: u64) -> Option<(&str, u64)> {
        None
    }
    fn kernel_string(&self, _: u64) -> Option<&str> {
        None
    }
    fn symbol_address(&self, _: &str) -> Option<u64> {
        None
    }
    fn long_size(&self) -> usize {
        8
    }
}

impl FieldText {
    /// How `fmt`'s print fmt shows field `name`, when it shows it as text.
    pub fn of(fmt: &EventFormat, name: &str) -> Option<FieldText> {
        let (pieces, args) = parse_parts(fmt, 8).ok()?;
        let index = (0..fmt.fields.len() + fmt.common_fields.len())
            .find(|&i| field_at(fmt, i).name == name)?;
        let field = field_at(fmt, index).clone();
        if field.layout != FieldLayout::Inline || field.array_len.is_some() || field.is_string {
            return None;
        }
        let mut steps = Vec::new();
        let mut ai = 0;
        for pc in pieces {
            let Piece::Conv(c) = pc else { continue };
            let arg = ai;
            ai += 1 + c.width_arg as usize + c.prec_arg as usize;
            let Some(e) = args.get(ai - 1) else { continue };
            if matches!(strip_casts(e), Expr::Field(i, _) if *i == index) {
                // Shown as the number too (softirq's `vec=%u [action=%s]`):
                // the number it is.
                return None;
            }
            let mut read = Vec::new();
            fields_read(e, &mut read);
            if c.kind == b's' && !read.is_empty() && read.iter().all(|&i| i == index) {
                steps.push(compile(fmt, c, &args, arg));
            }
        }
        (!steps.is_empty()).then(|| FieldText {
            fmt: fmt.clone(),
            field,
            print: PrintFmt { steps, args },
        })
    }

    /// The text of a record whose field holds `value` (its low bytes, as
    /// many as the field has).
    pub fn render(&self, value: u64) -> String {
        let f = &self.field;
        let mut data = vec![0u8; f.offset + f.size];
        let bytes = value.to_le_bytes();
        let n = f.size.min(8);
        data[f.offset..f.offset + n].copy_from_slice(&bytes[..n]);
        let mut out = Vec::new();
        self.print.write(
            &Ctx {
                fmt: &self.fmt,
                data: &data,
                big: false,
                kernel: &NoKernel,
            },
            &mut out,
        );
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// `e` without the casts around it.
fn strip_casts(mut e: &Expr) -> &Expr {
    while let Expr::Cast(_, a) = e {
        e = a;
    }
    e
}

/// Adds the index of every field `e` reads (fields, dynamic data, their
/// lengths, bitmasks) to `out`.
fn fields_read(e: &Expr, out: &mut Vec<usize>) {
    match e {
        Expr::Field(i, _) | Expr::Data(i, _) | Expr::DataLen(i) | Expr::Bitmask(i, _) => {
            out.push(*i)
        }
        Expr::Num(_) | Expr::Unknown(_) | Expr::Str(_) => {}
        Expr::Unary(_, a) | Expr::Cast(_, a) | Expr::Symbolic(a, _) | Expr::Flags(a, _, _) => {
            fields_read(a, out)
        }
        Expr::Binary(_, a, b) | Expr::Index(a, b) | Expr::Hex(a, b, _) => {
            fields_read(a, out);
            fields_read(b, out);
        }
        Expr::Cond(a, b, c) | Expr::Array(a, b, c) => {
            fields_read(a, out);
            fields_read(b, out);
            fields_read(c, out);
        }
    }
}

/// Adds the fields `e`, printed by conversion `c`, shows as names.
fn shown_in(fmt: &EventFormat, c: &Conv, e: &Expr, out: &mut Vec<(String, Shown)>) {
    let mut add = |i: usize, how: Shown| {
        let f = field_at(fmt, i);
        if !out.iter().any(|(n, _)| *n == f.name) {
            out.push((f.name.clone(), how));
        }
    };
    match e {
        Expr::Cast(_, a) => shown_in(fmt, c, a, out),
        Expr::Cond(_, a, b) => {
            shown_in(fmt, c, a, out);
            shown_in(fmt, c, b, out);
        }
        Expr::Symbolic(v, pairs) => {
            let mut v = v.as_ref();
            while let Expr::Cast(_, a) = v {
                v = a;
            }
            if let Expr::Field(i, _) = v {
                let known = pairs.iter().filter_map(|(n, s)| Some(((*n)?, s.clone())));
                add(*i, Shown::Symbolic(known.collect()));
            }
        }
        Expr::Field(i, _) | Expr::Data(i, _) if c.kind == b's' && field_at(fmt, *i).is_string => {
            add(*i, Shown::Text);
        }
        Expr::Field(i, _)
            if c.kind == b'p'
                && matches!(
                    c.ext.as_bytes().first(),
                    Some(b'S' | b's' | b'F' | b'f' | b'B')
                ) =>
        {
            add(*i, Shown::Symbol);
        }
        _ => {}
    }
}

impl PrintFmt {
    /// Parses `print_fmt` for `fmt`'s fields. `long` is the traced kernel's
    /// `sizeof(long)`. Errors name what could not be parsed.
    pub(crate) fn parse(fmt: &EventFormat, long: usize) -> Result<PrintFmt, String> {
        let (pieces, args) = parse_parts(fmt, long)?;
        let mut steps = Vec::with_capacity(pieces.len());
        let mut ai = 0;
        for pc in pieces {
            match pc {
                Piece::Lit(s) => steps.push(Step::Lit(Text::new(s.as_bytes()))),
                Piece::Conv(c) => {
                    let arg = ai;
                    ai += 1 + c.width_arg as usize + c.prec_arg as usize;
                    steps.push(compile(fmt, c, &args, arg));
                }
            }
        }
        Ok(PrintFmt { steps, args })
    }

    /// The same with each name the kernel left in an argument (not a field,
    /// not a number) that is a symbol of `kernel`'s kallsyms replaced by
    /// that symbol's address, as libtraceevent 1.7.1 evaluates it: x86-64's
    /// `mm_page_alloc` prints `page=` from `(struct page *)vmemmap_base +
    /// pfn`, the address of the variable `vmemmap_base` plus the pfn (seen
    /// on Debian 6.12's trace-cmd files, lab-corpus). Other names stay 0.
    pub(crate) fn with_symbols<K: Kernel>(mut self, kernel: &K) -> PrintFmt {
        fn resolve<K: Kernel>(e: &mut Expr, kernel: &K) {
            match e {
                Expr::Unknown(name) => {
                    if let Some(addr) = kernel.symbol_address(name) {
                        *e = Expr::Num(addr as i64);
                    }
                }
                Expr::Num(_)
                | Expr::Str(_)
                | Expr::Field(..)
                | Expr::Data(..)
                | Expr::DataLen(_)
                | Expr::Bitmask(..) => {}
                Expr::Unary(_, a)
                | Expr::Cast(_, a)
                | Expr::Symbolic(a, _)
                | Expr::Flags(a, _, _) => resolve(a, kernel),
                Expr::Binary(_, a, b) | Expr::Index(a, b) | Expr::Hex(a, b, _) => {
                    resolve(a, kernel);
                    resolve(b, kernel);
                }
                Expr::Cond(a, b, c) | Expr::Array(a, b, c) => {
                    resolve(a, kernel);
                    resolve(b, kernel);
                    resolve(c, kernel);
                }
            }
        }
        for e in &mut self.args {
            resolve(e, kernel);
        }
        self
    }

    /// Renders one record by running the compiled steps.
    pub(crate) fn write<K: Kernel>(&self, cx: &Ctx<'_, K>, out: &mut Vec<u8>) {
        for step in &self.steps {
            match step {
                Step::Lit(s) => s.push_to(out),
                Step::Int {
                    src,
                    conv,
                    size,
                    plain,
                } => {
                    let v = src.read(cx.data, cx.big);
                    if *plain {
                        write_plain_int(conv.kind, v, *size, out);
                    } else {
                        format_int(conv, v, *size, out);
                    }
                }
                Step::Str { field, conv, arg } => {
                    match field_at(cx.fmt, *field).raw(cx.data, cx.big) {
                        Some(b) => {
                            let mut s = until_nul(b);
                            if let Some(p) = conv.prec {
                                s = &s[..p.min(s.len())];
                            }
                            if conv.width.is_none() {
                                push_prefix(out, rest_from(cx.data, b), s.len());
                            } else {
                                pad(conv, s, out);
                            }
                        }
                        None => self.general(cx, conv, *arg, out),
                    }
                }
                Step::StrScalar { field, conv } => {
                    let f = field_at(cx.fmt, *field);
                    let raw = f.raw(cx.data, cx.big).unwrap_or(&[]);
                    if f.size == cx.kernel.long_size() {
                        // libtraceevent reads this pointer in the reading
                        // machine's byte order, not the file's: a
                        // big-endian file read on a little-endian machine
                        // looks up, and prints, the byte-swapped address
                        // (seen on s390x's rcu_utilization, lab-corpus).
                        let host_big = cfg!(target_endian = "big");
                        let addr = read_uint(raw, host_big).unwrap_or(0);
                        match cx.kernel.kernel_string(addr) {
                            Some(t) => out.extend_from_slice(t.as_bytes()),
                            None => out.extend_from_slice(format!("{addr:x}").as_bytes()),
                        }
                    } else {
                        pad(conv, until_nul(raw), out);
                    }
                }
                Step::RawBuf { conv, arg, dynamic } => {
                    let (len, value) = if conv.width_arg {
                        (self.num_arg(cx, *arg), *arg + 1)
                    } else {
                        (1, *arg)
                    };
                    if !dynamic {
                        out.extend_from_slice(b"ARG TYPE NOT FIELD BUT 2");
                        continue;
                    }
                    let b = match self.args.get(value).map(|e| eval(e, cx)) {
                        Some(Val::Bytes(b, _)) => b,
                        _ => &[],
                    };
                    let sep: &[u8] = match conv.ext.as_bytes().get(1) {
                        Some(b'C') => b":",
                        Some(b'D') => b"-",
                        Some(b'N') => b"",
                        _ => b" ",
                    };
                    let n = usize::try_from(len).unwrap_or(0).min(b.len());
                    for (i, x) in b[..n].iter().enumerate() {
                        if i > 0 {
                            out.extend_from_slice(sep);
                        }
                        out.extend_from_slice(format!("{x:02x}").as_bytes());
                    }
                }
                Step::Conv { conv, arg } => self.general(cx, conv, *arg, out),
            }
        }
    }

    /// A conversion whose arguments are evaluated: `*` width and precision
    /// first when the conversion takes them, then the value.
    fn general<K: Kernel>(&self, cx: &Ctx<'_, K>, c: &Conv, mut ai: usize, out: &mut Vec<u8>) {
        if !c.width_arg && !c.prec_arg {
            let v = self.args.get(ai).map_or(Val::Num(0), |e| eval(e, cx));
            return conv(cx, c, v, out);
        }
        let mut c = c.clone();
        if c.width_arg {
            let w = self.num_arg(cx, ai);
            ai += 1;
            c.left |= w < 0;
            c.width = Some(record_width(w));
        }
        if c.prec_arg {
            let p = self.num_arg(cx, ai);
            ai += 1;
            c.prec = (p >= 0).then_some(record_width(p));
        }
        let v = self.args.get(ai).map_or(Val::Num(0), |e| eval(e, cx));
        conv(cx, &c, v, out);
    }

    fn num_arg<K: Kernel>(&self, cx: &Ctx<'_, K>, i: usize) -> i64 {
        match self.args.get(i).map(|e| eval(e, cx)) {
            Some(Val::Num(n)) => n,
            _ => 0,
        }
    }
}

/// A printk_formats string with its escapes resolved as libtraceevent
/// resolves them in a trace_printk format: `\n`, `\t`, `\r`, `\\`, and
/// any other escaped character as itself (`\"` is `"`).
fn unescape_printk(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

/// Renders a `bprint` record (`trace_printk` with a constant format): `fmt`
/// is the format string the kernel keeps at the record's `fmt` address
/// (printk formats section), `args` the record's `buf`, where the kernel's
/// `vbin_printf` packed the arguments: each number aligned to its size (at
/// most 4: 8-byte values are stored as two u32 words) from the start of
/// `buf` (`int` for no length modifier and for `*` widths, `char`
/// for `hh`, `short` for `h`, `long` for `l`/`z`, 8 bytes for `ll`, `long` for
/// `%p`), each `%s` inline up to its NUL. Arguments `args` is too short for
/// print as 0 or empty. Errors: a conversion the format parser does not
/// support (the caller then prints the format as it is).
pub(crate) fn write_bprint<K: Kernel>(
    cx: &Ctx<'_, K>,
    fmt: &str,
    args: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let pieces = parse_printf(&unescape_printk(fmt))?;
    let long = cx.kernel.long_size();
    let big = cx.big;
    let mut at = 0usize;
    let next_num = |at: &mut usize, size: usize, signed: bool| -> i64 {
        *at = at.next_multiple_of(size.min(4));
        let v = args
            .get(*at..*at + size)
            .and_then(|b| read_uint(b, big))
            .unwrap_or(0);
        *at += size;
        if signed && size < 8 {
            let shift = 64 - 8 * size as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        }
    };
    let mut strings: Vec<(usize, usize)> = Vec::new();
    let mut vals: Vec<Option<i64>> = Vec::new();
    // First pass: where each argument lies (strings need the running offset).
    for pc in &pieces {
        let Piece::Conv(c) = pc else { continue };
        if c.width_arg {
            vals.push(Some(next_num(&mut at, 4, true)));
        }
        if c.prec_arg {
            vals.push(Some(next_num(&mut at, 4, true)));
        }
        match c.kind {
            b's' => {
                let start = at.min(args.len());
                let len = until_nul(&args[start..]).len();
                strings.push((start, len));
                vals.push(None);
                at = start + len + 1;
            }
            b'p' => vals.push(Some(next_num(&mut at, long, false))),
            _ => {
                let size = match c.len {
                    Len::Hh => 1,
                    Len::H => 2,
                    _ => int_size(c, long),
                };
                vals.push(Some(next_num(&mut at, size, matches!(c.kind, b'd' | b'i'))));
            }
        }
    }
    let mut vi = 0;
    let mut si = 0;
    for pc in &pieces {
        match pc {
            Piece::Lit(s) => out.extend_from_slice(s.as_bytes()),
            Piece::Conv(c) => {
                let mut c = c.clone();
                if c.width_arg {
                    let w = vals.get(vi).copied().flatten().unwrap_or(0);
                    vi += 1;
                    c.left |= w < 0;
                    c.width = Some(record_width(w));
                }
                if c.prec_arg {
                    let p = vals.get(vi).copied().flatten().unwrap_or(0);
                    vi += 1;
                    c.prec = (p >= 0).then_some(record_width(p));
                }
                let v = match vals.get(vi).copied().flatten() {
                    Some(n) => Val::Num(n),
                    None => {
                        let (s, l) = strings.get(si).copied().unwrap_or((0, 0));
                        si += 1;
                        Val::Bytes(args.get(s..s + l).unwrap_or(&[]), 1)
                    }
                };
                vi += 1;
                conv(cx, &c, v, out);
            }
        }
    }
    Ok(())
}

/// Most a `*` width or precision taken from a record may be: a record is
/// hostile input, and a width of 2^31 would make one line gigabytes long.
const MAX_RECORD_WIDTH: usize = 1024;

/// A `*` width or precision from a record (its magnitude), at most
/// [`MAX_RECORD_WIDTH`].
fn record_width(v: i64) -> usize {
    (v.unsigned_abs() as usize).min(MAX_RECORD_WIDTH)
}

fn num<K: Kernel>(e: &Expr, cx: &Ctx<'_, K>) -> i64 {
    // A string constant counts as libtraceevent counts its atoms: the C
    // integer it starts with (`strtoull`), 0 for a word such as "MMU".
    // A conditional counts as the branch it takes.
    match e {
        Expr::Str(s) => return crate::bytes::parse_c_integer(s),
        Expr::Cond(c, a, b) => {
            return if num(c, cx) != 0 {
                num(a, cx)
            } else {
                num(b, cx)
            };
        }
        _ => {}
    }
    match eval(e, cx) {
        Val::Num(n) => n,
        Val::Bytes(b, _) => b.as_ptr() as i64,
        Val::Text(_) | Val::Pieces(_) => 0,
    }
}

fn eval<'d, K: Kernel>(e: &'d Expr, cx: &Ctx<'d, K>) -> Val<'d> {
    match e {
        Expr::Num(n) => Val::Num(*n),
        Expr::Unknown(_) => Val::Num(0),
        Expr::Str(s) => Val::Bytes(s.as_bytes(), 1),
        Expr::Field(i, es) => {
            let f = field_at(cx.fmt, *i);
            let Some(raw) = f.raw(cx.data, cx.big) else {
                return Val::Num(0);
            };
            if f.array_len.is_some() || f.layout != FieldLayout::Inline {
                return Val::Bytes(raw, *es);
            }
            // Read as unsigned whatever `signed:` says, as libtraceevent
            // reads: a conversion's size gives the sign back when printed.
            match read_uint(raw, cx.big) {
                Some(v) => Val::Num(v as i64),
                None => Val::Bytes(raw, 1),
            }
        }
        Expr::Unary(op, a) => {
            let a = num(a, cx);
            Val::Num(match *op {
                "-" => a.wrapping_neg(),
                "!" => (a == 0) as i64,
                _ => !a,
            })
        }
        Expr::Binary(op, a, b) => {
            if *op == "&&" && num(a, cx) == 0 {
                return Val::Num(0);
            }
            if *op == "||" && num(a, cx) != 0 {
                return Val::Num(1);
            }
            Val::Num(binop(op, num(a, cx), num(b, cx)))
        }
        Expr::Cond(c, a, b) => {
            if num(c, cx) != 0 {
                eval(a, cx)
            } else {
                eval(b, cx)
            }
        }
        Expr::Cast(t, a) => match eval(a, cx) {
            Val::Num(n) => Val::Num(cast(*t, n)),
            v if t.pointer => v,
            Val::Bytes(b, _) => Val::Bytes(b, t.size.max(1)),
            v => v,
        },
        Expr::Index(a, i) => {
            let i = num(i, cx);
            match eval(a, cx) {
                Val::Bytes(b, es) => {
                    let es = es.max(1);
                    let at = (i.max(0) as usize).saturating_mul(es);
                    match b
                        .get(at..at.saturating_add(es))
                        .and_then(|x| read_uint(x, cx.big))
                    {
                        Some(v) => Val::Num(v as i64),
                        None => Val::Num(0),
                    }
                }
                _ => Val::Num(0),
            }
        }
        Expr::Data(i, es) => {
            let f = field_at(cx.fmt, *i);
            Val::Bytes(f.raw(cx.data, cx.big).unwrap_or(&[]), *es)
        }
        Expr::DataLen(i) => {
            let f = field_at(cx.fmt, *i);
            Val::Num(f.raw(cx.data, cx.big).map_or(0, |b| b.len() as i64))
        }
        Expr::Bitmask(i, cpus) => {
            let f = field_at(cx.fmt, *i);
            let b = f.raw(cx.data, cx.big).unwrap_or(&[]);
            Val::Text(if *cpus {
                cpu_list(b, cx.big)
            } else {
                bitmask(b, cx.big)
            })
        }
        Expr::Symbolic(v, pairs) => {
            let v = num(v, cx);
            match pairs.iter().find(|(n, _)| n.unwrap_or(-1) == v) {
                Some((_, s)) => Val::Text(s.clone()),
                // A value no entry names: in hex, without the conversion's
                // width.
                None => Val::Pieces(vec![(format!("0x{v:x}"), false)]),
            }
        }
        Expr::Flags(v, delim, pairs) => {
            let mut v = num(v, cx) as u64;
            // Each name takes the conversion's width, delimiters and the
            // hex of bits no name covers do not (libtraceevent).
            let mut p: Vec<(String, bool)> = Vec::new();
            // An unresolved value (-1) names the value 0; a known 0 never
            // matches.
            for (n, name) in pairs {
                let Some(n) = *n else {
                    if v == 0 {
                        p.push((name.clone(), true));
                        break;
                    }
                    continue;
                };
                let n = n as u64;
                if (n as i64) > 0 && v & n == n {
                    if !p.is_empty() {
                        p.push((delim.clone(), false));
                    }
                    p.push((name.clone(), true));
                    v &= !n;
                }
            }
            if v != 0 {
                if !p.is_empty() {
                    p.push((delim.clone(), false));
                }
                p.push((format!("0x{v:x}"), false));
            }
            Val::Pieces(p)
        }
        Expr::Hex(a, n, concat) => {
            let n = num(n, cx).max(0) as usize;
            let mut s = String::new();
            for (i, x) in from_field(a, cx).iter().take(n).enumerate() {
                if i > 0 && !concat {
                    s.push(' ');
                }
                s.push_str(&format!("{x:02x}"));
            }
            Val::Text(s)
        }
        Expr::Array(a, n, es) => {
            // libtraceevent 1.7.1 (trace-cmd 3.1.6's): elements in
            // decimal, space-separated; an element size other than 1, 2, 4
            // or 8 prints `BAD SIZE:N 0xFIRST_BYTE` and steps by one byte.
            let n = num(n, cx).max(0) as usize;
            let es = num(es, cx);
            let b = from_field(a, cx);
            let mut s = String::new();
            let mut at = 0usize;
            for i in 0..n {
                if at >= b.len() {
                    break;
                }
                if i > 0 {
                    s.push(' ');
                }
                match usize::try_from(es) {
                    Ok(size @ (1 | 2 | 4 | 8)) => {
                        let Some(v) = b.get(at..at + size).and_then(|c| read_uint(c, cx.big))
                        else {
                            break;
                        };
                        s.push_str(&v.to_string());
                        at += size;
                    }
                    _ => {
                        s.push_str(&format!("BAD SIZE:{} 0x{:x}", es as i32, b[at]));
                        at += 1;
                    }
                }
            }
            Val::Text(s)
        }
    }
}

/// The bytes `__print_hex` / `__print_array` read: from the start of the
/// field `e` names (inline, or the dynamic array's data) to the end of the
/// record, as libtraceevent reads them past the field (it stops nowhere; we
/// stop at the record's end). Other arguments: their own bytes.
fn from_field<'d, K: Kernel>(e: &'d Expr, cx: &Ctx<'d, K>) -> &'d [u8] {
    let field = match e {
        Expr::Field(i, _) | Expr::Data(i, _) => Some(field_at(cx.fmt, *i)),
        _ => None,
    };
    match field {
        Some(f) if f.layout == FieldLayout::Inline => cx.data.get(f.offset..).unwrap_or(&[]),
        Some(f) => match f.raw(cx.data, cx.big) {
            Some(r) => {
                let start = (r.as_ptr() as usize).saturating_sub(cx.data.as_ptr() as usize);
                cx.data.get(start..).unwrap_or(&[])
            }
            None => &[],
        },
        None => match eval(e, cx) {
            Val::Bytes(b, _) => b,
            _ => &[],
        },
    }
}

/// `__get_bitmask` as libtraceevent prints it: every byte in hex, most
/// significant first (the mask is an array of kernel longs in the file's
/// byte order), a comma between 32-bit groups counted from the low end.
fn bitmask(b: &[u8], big: bool) -> String {
    let mut s = String::with_capacity(b.len() * 2 + b.len() / 4);
    let n = b.len();
    for k in (0..n).rev() {
        // k counts bytes from the low end.
        let byte = if big { b[n - 1 - k] } else { b[k] };
        s.push_str(&format!("{byte:02x}"));
        if k > 0 && k % 4 == 0 {
            s.push(',');
        }
    }
    s
}

/// `__get_cpumask` as libtraceevent prints it: the set bits as a list of
/// CPUs and ranges, `0-1,4,6-7`.
fn cpu_list(b: &[u8], big: bool) -> String {
    let n = b.len();
    let bit = |i: usize| {
        let byte = if big { b[n - 1 - i / 8] } else { b[i / 8] };
        byte & (1 << (i % 8)) != 0
    };
    let mut s = String::new();
    let mut i = 0;
    while i < n * 8 {
        if !bit(i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < n * 8 && bit(i) {
            i += 1;
        }
        if !s.is_empty() {
            s.push(',');
        }
        if i - start == 1 {
            s.push_str(&start.to_string());
        } else {
            s.push_str(&format!("{start}-{}", i - 1));
        }
    }
    s
}

/// `s` cut to the conversion's precision, as `%.Ns` cuts.
fn precision<'s>(c: &Conv, s: &'s [u8]) -> &'s [u8] {
    match c.prec {
        Some(p) => &s[..p.min(s.len())],
        None => s,
    }
}

fn pad(c: &Conv, body: &[u8], out: &mut Vec<u8>) {
    let w = c.width.unwrap_or(0);
    let fill = w.saturating_sub(body.len());
    if c.left {
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(b' ', fill));
    } else {
        out.extend(std::iter::repeat_n(b' ', fill));
        out.extend_from_slice(body);
    }
}

fn int_size(c: &Conv, long: usize) -> usize {
    match c.len {
        Len::None => 4,
        Len::H => 2,
        Len::Hh => 1,
        Len::L | Len::Z => long,
        Len::Ll => 8,
    }
}

/// Writes `v` for an integer conversion without flag, width or precision
/// (`kind` one of `d i u x X o`, `size` the conversion's integer size): the
/// common case, without [`format_int`]'s padding logic.
#[inline]
fn write_plain_int(kind: u8, v: i64, size: usize, out: &mut Vec<u8>) {
    let mut ibuf = itoa::Buffer::new();
    match kind {
        b'd' | b'i' => {
            let s = sign_extend(v, size);
            out.extend_from_slice(ibuf.format(s).as_bytes());
        }
        b'u' => out.extend_from_slice(ibuf.format(truncate(v, size)).as_bytes()),
        b'x' | b'X' => {
            let mut buf = [0u8; 24];
            out.extend_from_slice(radix_digits(truncate(v, size), kind, &mut buf));
        }
        _ => format_int(&PLAIN_OCTAL, v, size, out),
    }
}

/// `%o` without flags: what [`write_plain_int`] hands to [`format_int`].
const PLAIN_OCTAL: Conv = Conv {
    left: false,
    zero: false,
    plus: false,
    space: false,
    alt: false,
    width: None,
    width_arg: false,
    prec: None,
    prec_arg: false,
    len: Len::None,
    kind: b'o',
    ext: String::new(),
};

/// The digits of `v` in hex (`kind` `x`: lowercase, `X`: uppercase) or
/// octal (`o`), written at the end of `buf` (22 octal digits hold any
/// `u64`), without leading zeros; `0` for 0.
pub(crate) fn radix_digits(v: u64, kind: u8, buf: &mut [u8; 24]) -> &[u8] {
    let (shift, table): (u32, &[u8; 16]) = match kind {
        b'X' => (4, b"0123456789ABCDEF"),
        b'o' => (3, b"0123456789abcdef"),
        _ => (4, b"0123456789abcdef"),
    };
    let mask = (1u64 << shift) - 1;
    let mut at = buf.len();
    let mut m = v;
    loop {
        at -= 1;
        buf[at] = table[(m & mask) as usize];
        m >>= shift;
        if m == 0 {
            break;
        }
    }
    &buf[at..]
}

/// `v`'s low `size` bytes, unsigned.
#[inline]
fn truncate(v: i64, size: usize) -> u64 {
    if size >= 8 {
        v as u64
    } else {
        (v as u64) & ((1u64 << (size * 8)) - 1)
    }
}

/// Writes `v` for integer conversion `c` of `size` bytes (see [`int_size`]).
fn format_int(c: &Conv, v: i64, size: usize, out: &mut Vec<u8>) {
    let signed = matches!(c.kind, b'd' | b'i');
    let (neg, mag): (bool, u64) = if signed {
        let s = sign_extend(v, size);
        (s < 0, s.unsigned_abs())
    } else {
        (false, truncate(v, size))
    };
    // Digits into a stack buffer (22 octal digits hold any u64): no
    // allocation per record, and shifts rather than divisions for hex and
    // octal.
    let mut ibuf = itoa::Buffer::new();
    let mut buf = [0u8; 24];
    let mut digits: &[u8] = match c.kind {
        b'x' | b'X' | b'o' => radix_digits(mag, c.kind, &mut buf),
        _ => ibuf.format(mag).as_bytes(),
    };
    if c.prec == Some(0) && mag == 0 {
        digits = &[];
    }
    // Leading zeros the precision asks for.
    let mut zeros = c.prec.map_or(0, |p| p.saturating_sub(digits.len()));
    let mut prefix: &[u8] = if neg {
        b"-"
    } else if signed && c.plus {
        b"+"
    } else if signed && c.space {
        b" "
    } else {
        b""
    };
    if c.alt && mag != 0 {
        match c.kind {
            b'x' => prefix = b"0x",
            b'X' => prefix = b"0X",
            b'o' if zeros == 0 && digits.first() != Some(&b'0') => prefix = b"0",
            _ => {}
        }
    }
    let w = c.width.unwrap_or(0);
    if c.zero && !c.left && c.prec.is_none() {
        zeros += w.saturating_sub(prefix.len() + digits.len() + zeros);
    }
    let len = prefix.len() + zeros + digits.len();
    let fill = w.saturating_sub(len);
    if !c.left {
        out.extend(std::iter::repeat_n(b' ', fill));
    }
    out.extend_from_slice(prefix);
    out.extend(std::iter::repeat_n(b'0', zeros));
    out.extend_from_slice(digits);
    if c.left {
        out.extend(std::iter::repeat_n(b' ', fill));
    }
}

fn until_nul(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `sizeof(long)` where trace-cmd runs (64-bit hosts): libtraceevent prints
/// `%l` conversions through the C `long` of its own machine, whatever the
/// traced kernel's long.
const HOST_LONG: usize = 8;

fn conv<K: Kernel>(cx: &Ctx<'_, K>, c: &Conv, v: Val<'_>, out: &mut Vec<u8>) {
    let long = HOST_LONG;
    match (c.kind, v) {
        (b's', Val::Bytes(b, _)) => {
            let mut s = until_nul(b);
            if let Some(p) = c.prec {
                s = &s[..p.min(s.len())];
            }
            pad(c, s, out);
        }
        (b's', Val::Text(t)) => pad(c, precision(c, t.as_bytes()), out),
        (_, Val::Pieces(p)) => {
            for (t, padded) in p {
                if padded {
                    pad(c, t.as_bytes(), out);
                } else {
                    out.extend_from_slice(t.as_bytes());
                }
            }
        }
        (b's', Val::Num(n)) => {
            let s = match cx.kernel.kernel_string(n as u64) {
                Some(s) => s.to_string(),
                None => format!("{:x}", n),
            };
            pad(c, precision(c, s.as_bytes()), out)
        }
        (b'p', v) => pointer(cx, c, v, out),
        (_, Val::Text(t)) => pad(c, t.as_bytes(), out),
        (b'c', Val::Num(n)) => pad(c, &[n as u8], out),
        (_, Val::Num(n)) => format_int(c, n, int_size(c, long), out),
        (_, Val::Bytes(b, es)) => {
            // An array used as a number: its first element.
            let es = es.clamp(1, 8);
            let n = b.get(..es).and_then(|x| read_uint(x, cx.big)).unwrap_or(0);
            format_int(c, n as i64, int_size(c, long), out)
        }
    }
}

/// An IPv6 address as libtraceevent prints `%pI6` (`colons`: four hex
/// digits per group, `:`-separated) and `%pi6` (32 hex digits).
fn ipv6(b: &[u8], colons: bool) -> String {
    let mut s = String::new();
    for i in 0..8 {
        if i > 0 && colons {
            s.push(':');
        }
        s.push_str(&format!("{:02x}{:02x}", b[2 * i], b[2 * i + 1]));
    }
    s
}

/// `%pI6c`: groups in hex without leading zeros, the longest run of two or
/// more zero groups as `::` (the first of equal runs).
fn ipv6_compressed(b: &[u8]) -> String {
    let w: Vec<u16> = (0..8)
        .map(|i| u16::from_be_bytes([b[2 * i], b[2 * i + 1]]))
        .collect();
    let (mut best, mut best_len) = (8, 1);
    let mut i = 0;
    while i < 8 {
        let start = i;
        while i < 8 && w[i] == 0 {
            i += 1;
        }
        if i - start > best_len {
            (best, best_len) = (start, i - start);
        }
        i = i.max(start + 1);
    }
    let mut s = String::new();
    let mut k = 0;
    while k < 8 {
        if k == best {
            s.push_str("::");
            k += best_len;
            continue;
        }
        if !s.is_empty() && !s.ends_with(':') {
            s.push(':');
        }
        s.push_str(&format!("{:x}", w[k]));
        k += 1;
    }
    s
}

/// `%pIS` (flags `p`: port, `c`: accepted, printed uncompressed) of a
/// `struct sockaddr` field as libtraceevent prints it: by its family (in
/// the file's byte order) `A.B.C.D[:PORT]`, `[IPV6]:PORT` or the address
/// alone, `INVALIDIPv4`/`INVALIDIPv6` when the field is too short, nothing
/// for other families.
fn sockaddr(b: &[u8], ext: &str, big: bool) -> String {
    let family = b.get(..2).and_then(|f| read_uint(f, big));
    let port = b.get(2..4).map_or(0, |p| u16::from_be_bytes([p[0], p[1]]));
    let with_port = ext.contains('p');
    match family {
        Some(2) if b.len() < 16 => "INVALIDIPv4".into(),
        Some(2) => {
            let a = &b[4..8];
            let mut s = if ext.starts_with('i') {
                format!("{:03}.{:03}.{:03}.{:03}", a[0], a[1], a[2], a[3])
            } else {
                format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
            };
            if with_port {
                s.push_str(&format!(":{port}"));
            }
            s
        }
        Some(10) if b.len() < 28 => "INVALIDIPv6".into(),
        Some(10) => {
            let a = ipv6(&b[8..24], ext.starts_with('I'));
            if with_port {
                format!("[{a}]:{port}")
            } else {
                a
            }
        }
        _ => String::new(),
    }
}

fn pointer<K: Kernel>(cx: &Ctx<'_, K>, c: &Conv, v: Val<'_>, out: &mut Vec<u8>) {
    let ext = c.ext.as_str();
    let bytes = match &v {
        Val::Bytes(b, _) => Some(*b),
        _ => None,
    };
    let addr = match &v {
        Val::Num(n) => *n as u64,
        Val::Bytes(b, _) => {
            read_uint(b.get(..cx.kernel.long_size()).unwrap_or(&[]), cx.big).unwrap_or(0)
        }
        Val::Text(_) | Val::Pieces(_) => 0,
    };
    let s = match ext {
        "S" | "s" | "F" | "f" | "B" | "SR" => match cx.kernel.symbol(addr) {
            Some((name, off)) if matches!(ext, "S" | "F" | "B" | "SR") => {
                format!("{name}+0x{off:x}")
            }
            Some((name, _)) => name.to_string(),
            None => format!("0x{addr:x}"),
        },
        "I4" | "i4" => {
            let b = bytes.unwrap_or(&[]);
            if b.len() < 4 {
                return pad(c, b"(null)", out);
            }
            format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
        }
        "I6" | "i6" | "I6c" => {
            let b = bytes.unwrap_or(&[]);
            if b.len() < 16 {
                return pad(c, b"(null)", out);
            }
            if ext == "I6c" {
                ipv6_compressed(b)
            } else {
                ipv6(b, ext != "i6")
            }
        }
        "IS" | "iS" | "ISp" | "iSp" | "ISc" | "iSc" | "ISpc" | "iSpc" => {
            sockaddr(bytes.unwrap_or(&[]), ext, cx.big)
        }
        "M" | "m" | "MR" => {
            let b = bytes.unwrap_or(&[]);
            if b.len() < 6 {
                return pad(c, b"(null)", out);
            }
            let mut idx: Vec<usize> = (0..6).collect();
            if ext == "MR" {
                idx.reverse();
            }
            let sep = if ext == "m" { "" } else { ":" };
            idx.iter()
                .map(|i| format!("{:02x}", b[*i]))
                .collect::<Vec<_>>()
                .join(sep)
        }
        "U" | "Ub" | "UB" | "Ul" | "UL" => {
            let b = bytes.unwrap_or(&[]);
            if b.len() < 16 {
                return pad(c, b"(null)", out);
            }
            let order: [usize; 16] = if ext.contains('l') || ext.contains('L') {
                [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15]
            } else {
                [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
            };
            let mut s = String::new();
            for (k, i) in order.iter().enumerate() {
                if matches!(k, 4 | 6 | 8 | 10) {
                    s.push('-');
                }
                if ext.contains('B') || ext.contains('L') {
                    s.push_str(&format!("{:02X}", b[*i]));
                } else {
                    s.push_str(&format!("{:02x}", b[*i]));
                }
            }
            s
        }
        _ => {
            if addr == 0 {
                "(nil)".to_string()
            } else {
                format!("0x{addr:x}")
            }
        }
    };
    pad(c, s.as_bytes(), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    struct K;
    impl Kernel for K {
        fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
            (addr >= 0x1000).then(|| ("do_thing", addr - 0x1000))
        }
        fn kernel_string(&self, _: u64) -> Option<&str> {
            None
        }
        fn symbol_address(&self, name: &str) -> Option<u64> {
            (name == "thing_base").then_some(0x5000)
        }
        fn long_size(&self) -> usize {
            8
        }
    }

    fn fmt(fields: &str, pf: &str) -> EventFormat {
        let text = format!(
            "name: t\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n{fields}\nprint fmt: {pf}\n"
        );
        EventFormat::parse("s", &text).unwrap()
    }

    fn render(f: &EventFormat, data: &[u8]) -> String {
        render_as(f, data, false)
    }

    /// [`render`] of a record of a big-endian (`big`) or little-endian file.
    fn render_as(f: &EventFormat, data: &[u8], big: bool) -> String {
        let p = PrintFmt::parse(f, 8).unwrap().with_symbols(&K);
        let mut out = Vec::new();
        p.write(
            &Ctx {
                fmt: f,
                data,
                big,
                kernel: &K,
            },
            &mut out,
        );
        String::from_utf8(out).unwrap()
    }

    /// A field's text as its print fmt shows it by itself: Debian 6.12's
    /// sched_switch `prev_state` (flags, `R` for none, `+` when preempted)
    /// and softirq_entry's `vec`; none for a field shown as a number or text.
    #[test]
    fn field_text_is_the_print_fmts_text_of_that_field_alone() {
        let switch = fmt(
            "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n",
            "\"prev_comm=%s prev_pid=%d prev_state=%s%s\", REC->prev_comm, REC->prev_pid,              (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ?              __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\",              { 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\",              REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\"",
        );
        let state = FieldText::of(&switch, "prev_state").unwrap();
        let shown: Vec<String> = [0, 1, 2, 0x80, 0x100, 0x3].map(|v| state.render(v)).into();
        assert_eq!(shown, ["R", "S", "D", "I", "R+", "S|D"]);
        assert!(FieldText::of(&switch, "prev_pid").is_none());
        assert!(FieldText::of(&switch, "prev_comm").is_none());
        assert!(FieldText::of(&switch, "nope").is_none());
        // Shown as a number beside its name: the number.
        let softirq = fmt(
            "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;",
            "\"vec=%u [action=%s]\", REC->vec, __print_symbolic(REC->vec, { 0, \"HI\" }, { 1, \"TIMER\" })",
        );
        assert!(FieldText::of(&softirq, "vec").is_none());
        let named = fmt(
            "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;",
            "\"action=%s\", __print_symbolic(REC->vec, { 0, \"HI\" }, { 1, \"TIMER\" })",
        );
        let vec = FieldText::of(&named, "vec").unwrap();
        assert_eq!([vec.render(1), vec.render(7)], ["TIMER", "0x7"]);
    }

    /// x86-64's `mm_page_alloc` (6.12): `page=` is the address of the
    /// variable `vmemmap_base` plus the pfn, as libtraceevent computes it (no
    /// scaling by the struct's size); a name kallsyms lacks stays 0.
    #[test]
    fn names_in_arguments_are_their_kallsyms_addresses() {
        let f = fmt(
            "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\"page=%p pfn=0x%lx other=%lx\", REC->pfn != -1UL ? (((struct page *)thing_base) + (REC->pfn)) : ((void *)0), REC->pfn, NOT_A_SYMBOL + REC->pfn",
        );
        let mut d = vec![0u8; 16];
        d[8..16].copy_from_slice(&0x3du64.to_le_bytes());
        assert_eq!(render(&f, &d), "page=0x503d pfn=0x3d other=3d");
    }

    /// A `const char *` field printed with `%s` (s390x's rcu_utilization):
    /// libtraceevent reads the pointer in the reading machine's byte order,
    /// so a big-endian file's is looked up and printed byte-swapped on a
    /// little-endian machine.
    #[test]
    fn a_string_pointer_is_read_in_this_machines_byte_order() {
        let f = fmt(
            "\tfield:const char * s;\toffset:8;\tsize:8;\tsigned:0;\n",
            "\"%s\", REC->s",
        );
        let mut d = vec![0u8; 16];
        d[8..16].copy_from_slice(&0x00c1_371au64.to_be_bytes());
        let want = if cfg!(target_endian = "little") {
            "1a37c10000000000"
        } else {
            "c1371a"
        };
        assert_eq!(render_as(&f, &d, true), want);
    }

    /// The fields shown as names, from 6.18's formats: a softirq's vector
    /// (symbolic), a fault's addresses (symbols), an exec's filename (text),
    /// a signal's target comm (text), a reset's state (in a ternary) and reason.
    #[test]
    fn fields_shown_as_names_come_from_the_print_fmt() {
        let soft = fmt(
            "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;",
            "\"vec=%u [action=%s]\", REC->vec, __print_symbolic(REC->vec, { 0, \"HI\" }, { 1, \"TIMER\" }, { NET_RX_SOFTIRQ, \"NET_RX\" }, { NOPE, \"X\" })",
        );
        let table = vec![
            (0, "HI".to_string()),
            (1, "TIMER".into()),
            (3, "NET_RX".into()),
        ];
        assert_eq!(
            shown_fields(&soft),
            [("vec".to_string(), Shown::Symbolic(table))]
        );
        let fault = fmt(
            "\tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:unsigned long error_code;\toffset:24;\tsize:8;\tsigned:0;",
            "\"address=%ps ip=%ps error_code=0x%lx\", (void *)REC->address, (void *)REC->ip, REC->error_code",
        );
        assert_eq!(
            shown_fields(&fault),
            [
                ("address".to_string(), Shown::Symbol),
                ("ip".to_string(), Shown::Symbol)
            ]
        );
        let exec = fmt(
            "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;",
            "\"filename=%s pid=%d\", __get_str(filename), REC->pid",
        );
        assert_eq!(shown_fields(&exec), [("filename".to_string(), Shown::Text)]);
        let signal = fmt(
            "\tfield:int sig;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:char comm[16];\toffset:12;\tsize:16;\tsigned:0;\n\tfield:const char * s;\toffset:32;\tsize:8;\tsigned:0;",
            "\"sig=%d comm=%s s=%s\", REC->sig, REC->comm, REC->s",
        );
        assert_eq!(shown_fields(&signal), [("comm".to_string(), Shown::Text)]);
        let reset = fmt(
            "\tfield:int state;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int reason;\toffset:12;\tsize:4;\tsigned:0;",
            "\"state=%s reason=%s\", REC->state ? __print_symbolic(REC->state, { 1, \"TCP_ESTABLISHED\" }) : \"UNKNOWN\", __print_symbolic(REC->reason, { 0, \"NOT_SPECIFIED\" })",
        );
        let names: Vec<String> = shown_fields(&reset).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["state", "reason"]);
        assert!(shown_fields(&fmt("", "\"%s\", bogus(")).is_empty());
    }

    #[test]
    fn bprint_arguments_are_unpacked_as_vbin_printf_packs_them() {
        let f = fmt("", "\"\"");
        // int 7 at 0, "sh\0" at 4..7, 8-byte value aligned to 4 (not 8) at
        // 8, a short aligned to 2 at 16, a %pS at 20 (again aligned to 4).
        let mut a = vec![0u8; 28];
        a[0..4].copy_from_slice(&7i32.to_le_bytes());
        a[4..7].copy_from_slice(b"sh\0");
        a[8..16].copy_from_slice(&(-2i64).to_le_bytes());
        a[16..18].copy_from_slice(&300u16.to_le_bytes());
        a[20..28].copy_from_slice(&0x1010u64.to_le_bytes());
        let cx = Ctx {
            fmt: &f,
            data: &[],
            big: false,
            kernel: &K,
        };
        let mut out = Vec::new();
        write_bprint(
            &cx,
            "n=%d c=%s v=%lld h=%hu f=%pS missing=%d\n",
            &a,
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "n=7 c=sh v=-2 h=300 f=do_thing+0x10 missing=0\n"
        );
        assert!(write_bprint(&cx, "%q", &a, &mut Vec::new()).is_err());
    }

    /// The trees libtraceevent 1.7.1 builds, checked against what trace-cmd
    /// 3.1.6 printed for these kernels' formats (timer_start, btrfs
    /// raid56_write, xen_mc_batch; crates/tracedat/tests/differential.rs).
    #[test]
    fn expressions_group_as_libtraceevent_groups_them() {
        let f = fmt(
            "\tfield:unsigned int x;\toffset:8;\tsize:4;\tsigned:0;\n",
            "\"%x %d %s %s\", REC->x & (0x10 | 0x20 | 0x40), 10 - 3 + 2, \
             (REC->x == 0) ? \"MMU\" : (REC->x == 1) ? \"CPU\" : \"NONE\", \
             REC->x ? \"7\" : \"0\" ? \"yes\" : \"no\"",
        );
        let mut d = vec![0u8; 12];
        // (x & 0x10) | 0x20 | 0x40; 10 - (3 + 2); the first `?:` chooses
        // "MMU", which counts 0 as the second's condition; "7" counts 7.
        d[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(render(&f, &d), "60 5 NONE no");
        d[8..12].copy_from_slice(&0x11u32.to_le_bytes());
        assert_eq!(render(&f, &d), "70 5 NONE yes");
    }

    #[test]
    fn printf_flags_symbolic_flags_and_symbols() {
        let f = fmt(
            "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:unsigned long b;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:char c[4];\toffset:24;\tsize:4;\tsigned:0;\n",
            "\"a=%-5d| b=%#08lx c=%s s=%s f=%s p=%pS q=%ps %s\", REC->a, REC->b, REC->c, \
__print_symbolic(REC->a, { -3, \"MINUS3\" }, { 1, \"ONE\" }), \
__print_flags(REC->b, \"|\", { 1, \"A\" }, { 2, \"B\" }), REC->b, REC->b, \
REC->a < 0 ? \"neg\" : \"pos\"",
        );
        let mut d = vec![0u8; 28];
        d[8..12].copy_from_slice(&(-3i32).to_le_bytes());
        d[16..24].copy_from_slice(&0x1007u64.to_le_bytes());
        d[24..27].copy_from_slice(b"ab\0");
        assert_eq!(
            render(&f, &d),
            // libtraceevent: a negative table entry stands for -1, so the
            // int field's -3 (read unsigned) is a miss; comparisons are
            // unsigned, so `a < 0` is false.
            "a=-3   | b=0x001007 c=ab s=0xfffffffd f=A|B|0x1004 p=do_thing+0x7 q=do_thing pos"
        );
    }

    #[test]
    fn helpers_print_as_libtraceevent_1_7_prints_them() {
        let f = fmt(
            "\tfield:int v;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc unsigned long[] mask;\toffset:12;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long long big;\toffset:16;\tsize:8;\tsigned:0;\n",
            "\"[%-6s] [%-4s] %s %s %ld %lx %d\", __print_symbolic(REC->v, { 1, \"one\" }), \
__print_flags(REC->v, \"|\", { 1, \"A\" }), __get_bitmask(mask), __get_cpumask(mask), \
REC->v, REC->big, (REC->v < 0)",
        );
        let mut d = vec![0u8; 32];
        d[8..12].copy_from_slice(&(-1i32).to_le_bytes());
        // The mask: 8 bytes at 24.
        d[12..16].copy_from_slice(&(24u32 | (8 << 16)).to_le_bytes());
        d[16..24].copy_from_slice(&0x1_0000_0002u64.to_le_bytes());
        d[24..32].copy_from_slice(&0x0000_0001_0000_00f1u64.to_le_bytes());
        assert_eq!(
            render(&f, &d),
            // A miss and a flag remainder take no width; a bitmask keeps its
            // zeros; %ld of an int reads it unsigned; comparisons are
            // unsigned (-1 < 0 is false).
            "[0xffffffff] [A   |0xfffffffe] 00000001,000000f1 0,4-7,32 4294967295 100000002 0"
        );
    }

    /// 100,000 parentheses, 200,000 minus signs, a chain of 100,000 `+` or
    /// of `[0]` nest far past [`MAX_DEPTH`]: an error, not a stack overflow
    /// (parsing, evaluating or dropping the tree). A tree just inside the
    /// bound still parses and prints.
    #[test]
    fn nesting_past_the_depth_bound_is_an_error_not_a_crash() {
        let n = 100_000;
        let hostile = [
            format!("\"%d\", {}1{}", "(".repeat(n), ")".repeat(n)),
            format!("\"%d\", {}1", "-".repeat(2 * n)),
            format!("\"%d\", {}1", "(int)".repeat(n)),
            format!("\"%d\", 1{}", "+1".repeat(n)),
            format!("\"%d\", 1{}", " ? 1 : 1".repeat(n)),
            format!("\"%d\", REC->a{}", "[0]".repeat(n)),
        ];
        let fields = "\tfield:int a[4];\toffset:8;\tsize:16;\tsigned:1;\n";
        for pf in hostile {
            let e = PrintFmt::parse(&fmt(fields, &pf), 8).err();
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("nest deeper than 256")),
                "{}...: {e:?}",
                &pf[..20]
            );
        }
        let d = MAX_DEPTH / 2 - 1;
        let f = fmt("", &format!("\"%d\", {}7{}", "(".repeat(d), ")".repeat(d)));
        assert_eq!(render(&f, &[0; 8]), "7");
        let f = fmt("", &format!("\"%d\", {}7", "-".repeat(MAX_DEPTH - 2)));
        assert_eq!(render(&f, &[0; 8]), "7");
    }

    #[test]
    fn unsupported_is_an_error() {
        let f = fmt("", "\"%d\", some_helper(1)");
        assert!(PrintFmt::parse(&f, 8).is_err());
        let f = fmt("", "\"%d %d\", 1");
        assert!(PrintFmt::parse(&f, 8).is_err());
    }
}
