//! Event format descriptions (`events/SYSTEM/EVENT/format` text) and field
//! decoding.

use crate::Error;

/// How a field's bytes are located inside a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldLayout {
    /// A plain value or fixed-size array stored at `offset..offset + size`.
    Inline,
    /// `__data_loc`: a u32 at `offset` holds `data offset | (length << 16)`,
    /// the data offset counted from the start of the record.
    DataLoc,
    /// `__rel_loc`: like `DataLoc`, but the data offset is counted from the
    /// end of this 4-byte field.
    RelLoc,
    /// A trailing flexible array (`char buf[]` with `size:0`, or `char buf`
    /// with `size:0` on old kernels): the bytes from
    /// `offset` to the end of the record.
    Trailing,
}

/// One field of an event format, as declared by a `field:` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field name, e.g. `prev_comm`.
    pub name: String,
    /// Declared C type without the name and array suffix, e.g. `char`,
    /// `unsigned long`, `const char *`; for `__data_loc char[] name` it is
    /// `__data_loc char[]`.
    pub type_name: String,
    /// Byte offset of the field in the record (from `offset:`).
    pub offset: usize,
    /// Size in bytes (from `size:`); for arrays the whole array.
    pub size: usize,
    /// Whether the value is signed (from `signed:`).
    pub signed: bool,
    /// `Some(n)` for a declared array `[n]`, `Some(0)` for `[]`; `None` for
    /// a scalar.
    pub array_len: Option<usize>,
    /// Where the field's bytes live.
    pub layout: FieldLayout,
    /// True for character data (`char`/`unsigned char` arrays, `__data_loc
    /// char[]`): decoded as [`FieldValue::Str`].
    pub is_string: bool,
    /// True when the declared type is a pointer (`*` in the type): printed in
    /// hex.
    pub is_pointer: bool,
}

/// A decoded field value.
///
/// * `Int` / `UInt`: scalars of 1, 2, 4 or 8 bytes, signed or not according
///   to the format's `signed:` flag, in the file's byte order.
/// * `Str`: character data up to (not including) the first NUL.
/// * `Bytes`: anything else (odd sizes, non-character dynamic arrays).
/// * `Array`: fixed arrays of non-character elements, element by element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer (also pointers).
    UInt(u64),
    /// Text bytes up to the first NUL.
    Str(&'a [u8]),
    /// Raw bytes.
    Bytes(&'a [u8]),
    /// Array elements.
    Array(Vec<FieldValue<'a>>),
}

/// A parsed event format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// Event id (`ID:` line); records carry it in `common_type`.
    pub id: u16,
    /// System name (directory under `events/`, `ftrace` for internal ones).
    pub system: String,
    /// Event name (`name:` line).
    pub name: String,
    /// Event-specific fields in declaration order.
    pub fields: Vec<Field>,
    /// The common fields (`common_type`, `common_flags`,
    /// `common_preempt_count`, `common_pid`, ...).
    pub common_fields: Vec<Field>,
    /// The text after `print fmt: `.
    pub print_fmt: String,
    /// Offset of a 4-byte `common_pid`, looked up once at parse.
    pid_offset: Option<usize>,
}

fn format_err(system: &str, name: &str, line: usize, detail: impl Into<String>) -> Error {
    Error::Format {
        system: system.to_string(),
        name: if name.is_empty() {
            "?".to_string()
        } else {
            name.to_string()
        },
        line,
        detail: detail.into(),
    }
}

/// Parse a `field:...;\toffset:N;\tsize:N;\tsigned:N;` line (leading
/// whitespace already removed, starting at `field:`).
pub(crate) fn parse_field_line(line: &str) -> Result<Field, String> {
    let rest = line
        .strip_prefix("field:")
        .ok_or_else(|| "expected `field:`".to_string())?;
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for (i, part) in rest.split(';').enumerate() {
        let part = part.trim();
        if i == 0 {
            decl = Some(part);
            continue;
        }
        if part.is_empty() {
            continue;
        }
        let Some((k, v)) = part.split_once(':') else {
            return Err(format!("malformed attribute `{part}`"));
        };
        let v = v.trim();
        let num = || {
            v.parse::<usize>()
                .map_err(|_| format!("bad number `{v}` for `{k}`"))
        };
        match k.trim() {
            "offset" => offset = Some(num()?),
            "size" => size = Some(num()?),
            "signed" => signed = Some(num()? != 0),
            _ => {}
        }
    }
    let decl = decl.filter(|d| !d.is_empty()).ok_or("empty declaration")?;
    let offset = offset.ok_or("missing offset")?;
    let size = size.ok_or("missing size")?;
    let signed = signed.unwrap_or(false);
    parse_decl(decl, offset, size, signed)
}

fn parse_decl(decl: &str, offset: usize, size: usize, signed: bool) -> Result<Field, String> {
    let mut layout = FieldLayout::Inline;
    let mut d = decl.trim();
    if let Some(r) = d.strip_prefix("__data_loc ") {
        layout = FieldLayout::DataLoc;
        d = r.trim();
    } else if let Some(r) = d.strip_prefix("__rel_loc ") {
        layout = FieldLayout::RelLoc;
        d = r.trim();
    }
    // Split off an array suffix `[...]` at the very end.
    let mut array_len = None;
    let mut body = d;
    if let Some(stripped) = d.strip_suffix(']')
        && let Some(open) = stripped.rfind('[')
    {
        let inner = stripped[open + 1..].trim();
        array_len = Some(if inner.is_empty() {
            0
        } else {
            // Symbolic lengths (old kernels) are derived from the size later.
            inner.parse::<usize>().unwrap_or(0)
        });
        body = stripped[..open].trim_end();
    }
    // The name is the last identifier.
    let name_start = body
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let name = &body[name_start..];
    if name.is_empty() {
        return Err(format!("no field name in `{decl}`"));
    }
    let mut type_part = body[..name_start].trim().to_string();
    if type_part.is_empty() {
        return Err(format!("no type in `{decl}`"));
    }
    // `__data_loc char[] name`: the brackets belong to the type.
    let mut elem_type = type_part.clone();
    if let Some(t) = type_part.strip_suffix("[]") {
        elem_type = t.trim().to_string();
        if array_len.is_none() {
            array_len = Some(0);
        }
    }
    if layout != FieldLayout::Inline {
        type_part = format!(
            "{} {}",
            if layout == FieldLayout::DataLoc {
                "__data_loc"
            } else {
                "__rel_loc"
            },
            type_part
        );
    } else if size == 0 && matches!(array_len, None | Some(0)) {
        // `char buf[]`, or on old kernels `char buf` / `u32 buf` with size 0:
        // the bytes from the offset to the end of the record.
        array_len = Some(0);
        layout = FieldLayout::Trailing;
    }
    let base = elem_type
        .trim_start_matches("const ")
        .trim_start_matches("volatile ")
        .trim();
    let is_pointer = elem_type.contains('*');
    let is_string = !is_pointer
        && array_len.is_some()
        && matches!(base, "char" | "unsigned char" | "signed char");
    Ok(Field {
        name: name.to_string(),
        type_name: type_part,
        offset,
        size,
        signed,
        array_len,
        layout,
        is_string,
        is_pointer,
    })
}

impl EventFormat {
    /// Parse the text of an `events/SYSTEM/NAME/format` file.
    ///
    /// `system` is the directory name the format came from (it is not in the
    /// text). Fields of the first block (before the first empty line after
    /// `format:`) are the common fields; if there is no empty line, fields
    /// whose name starts with `common_` are. Errors name the line.
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, Error> {
        let mut name = String::new();
        let mut id: Option<u16> = None;
        let mut common = Vec::new();
        let mut fields = Vec::new();
        let mut print_fmt = String::new();
        let mut in_format = false;
        let mut saw_blank = false;
        let mut first_block_ended = false;
        // The print fmt runs to the end of the text: its string may hold a
        // raw newline (ext4's fsmap events end theirs with one).
        let (head, tail) = match text.find("\nprint fmt:") {
            Some(at) => (&text[..at + 1], Some(&text[at + 1..])),
            None => (text, None),
        };
        if let Some(v) = tail.and_then(|t| t.strip_prefix("print fmt:")) {
            print_fmt = v.trim().to_string();
        }
        for (i, raw) in head.lines().enumerate() {
            let lineno = i + 1;
            let line = raw.trim();
            if let Some(v) = raw.strip_prefix("name:") {
                name = v.trim().to_string();
            } else if let Some(v) = raw.strip_prefix("ID:") {
                let v = v.trim();
                id = Some(
                    v.parse::<u16>()
                        .map_err(|_| format_err(system, &name, lineno, format!("bad ID `{v}`")))?,
                );
            } else if raw.starts_with("format:") {
                in_format = true;
            } else if let Some(v) = raw.strip_prefix("print fmt:") {
                print_fmt = v.trim().to_string();
                in_format = false;
            } else if in_format && line.is_empty() {
                if !common.is_empty() || !fields.is_empty() {
                    first_block_ended = true;
                    saw_blank = true;
                }
            } else if in_format && line.starts_with("field:") {
                let f = parse_field_line(line).map_err(|e| format_err(system, &name, lineno, e))?;
                if first_block_ended {
                    fields.push(f);
                } else {
                    common.push(f);
                }
            }
        }
        let id = id.ok_or_else(|| format_err(system, &name, 0, "missing ID line"))?;
        if name.is_empty() {
            return Err(format_err(system, &name, 0, "missing name line"));
        }
        if !saw_blank {
            // No block separator: classify by name.
            let all = std::mem::take(&mut common);
            for f in all {
                if f.name.starts_with("common_") {
                    common.push(f);
                } else {
                    fields.push(f);
                }
            }
        }
        let pid_offset = pid_offset(&common);
        Ok(EventFormat {
            id,
            system: system.to_string(),
            name,
            fields,
            common_fields: common,
            print_fmt,
            pid_offset,
        })
    }

    /// Look up a field by name, event fields first, then common fields.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .chain(self.common_fields.iter())
            .find(|f| f.name == name)
    }

    /// A placeholder for records whose `common_type` matches no stored
    /// format: standard common fields only, name `UNKNOWN`, id 0.
    pub(crate) fn unknown() -> EventFormat {
        let mk = |name: &str, ty: &str, offset, size, signed| Field {
            name: name.into(),
            type_name: ty.into(),
            offset,
            size,
            signed,
            array_len: None,
            layout: FieldLayout::Inline,
            is_string: false,
            is_pointer: false,
        };
        EventFormat {
            id: 0,
            system: String::new(),
            name: "UNKNOWN".into(),
            fields: Vec::new(),
            common_fields: vec![
                mk("common_type", "unsigned short", 0, 2, false),
                mk("common_flags", "unsigned char", 2, 1, false),
                mk("common_preempt_count", "unsigned char", 3, 1, false),
                mk("common_pid", "int", 4, 4, true),
            ],
            print_fmt: String::new(),
            pid_offset: Some(4),
        }
    }

    /// Offset of `common_pid` when it is a 4-byte field.
    #[inline]
    pub(crate) fn pid_offset(&self) -> Option<usize> {
        self.pid_offset
    }
}

fn pid_offset(common: &[Field]) -> Option<usize> {
    common
        .iter()
        .find(|f| f.name == "common_pid" && f.size == 4 && f.layout == FieldLayout::Inline)
        .map(|f| f.offset)
}

/// Read an unsigned integer of `size` (1, 2, 4 or 8) bytes.
#[inline]
pub(crate) fn read_uint(b: &[u8], big: bool) -> Option<u64> {
    Some(match b.len() {
        1 => b[0] as u64,
        2 => {
            let a = [b[0], b[1]];
            if big {
                u16::from_be_bytes(a) as u64
            } else {
                u16::from_le_bytes(a) as u64
            }
        }
        4 => {
            let a = [b[0], b[1], b[2], b[3]];
            if big {
                u32::from_be_bytes(a) as u64
            } else {
                u32::from_le_bytes(a) as u64
            }
        }
        8 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            if big {
                u64::from_be_bytes(a)
            } else {
                u64::from_le_bytes(a)
            }
        }
        _ => return None,
    })
}

fn sign_extend(v: u64, size: usize) -> i64 {
    match size {
        1 => v as u8 as i8 as i64,
        2 => v as u16 as i16 as i64,
        4 => v as u32 as i32 as i64,
        _ => v as i64,
    }
}

fn until_nul(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

fn scalar<'a>(b: &'a [u8], signed: bool, big: bool) -> FieldValue<'a> {
    match read_uint(b, big) {
        Some(v) if signed => FieldValue::Int(sign_extend(v, b.len())),
        Some(v) => FieldValue::UInt(v),
        None => FieldValue::Bytes(b),
    }
}

/// A field read as a plain integer, resolved once per event format (see
/// [`Field::int`]) so a pass over many records reads it at a fixed offset
/// instead of looking the field up and decoding it per record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntField {
    /// Byte offset in the record; `usize::MAX` for a field that is not a
    /// plain integer (no record reaches it, so it reads as none without a
    /// test of its own).
    offset: usize,
    /// 1, 2, 4 or 8; 0 for a field that is not a plain integer.
    size: u8,
    /// `64 - 8 * size`: the bits of a 64-bit word beside the field.
    rest: u8,
    /// Sign-extended when read.
    signed: bool,
}

/// A field that is not a plain integer: it reads as none.
impl Default for IntField {
    fn default() -> Self {
        IntField {
            offset: usize::MAX,
            size: 0,
            rest: 0,
            signed: false,
        }
    }
}

impl IntField {
    /// Where the field is: byte offset, size (1, 2, 4 or 8; 0 when it is
    /// not a plain integer, with offset `usize::MAX`) and whether it is
    /// signed.
    pub fn place(self) -> (usize, u8, bool) {
        (self.offset, self.size, self.signed)
    }

    /// The value in `data` (a record payload) in the file's byte order:
    /// sign-extended to 64 bits when the field is signed, so
    /// `get(..) as i64` is [`FieldValue::Int`] and `get(..)` is
    /// [`FieldValue::UInt`] of [`Field::decode`]. `None` when the record is
    /// too short, or the field is not a plain integer (decode gives no
    /// `Int`/`UInt` for it).
    #[inline(always)]
    pub fn get(self, data: &[u8], big_endian: bool) -> Option<u64> {
        // One 8-byte load and two shifts read any size: the field's bytes
        // are moved to the top of the word and shifted down, with the sign
        // when signed. The word starts at the field when 8 bytes follow it
        // there (the field is then its low bytes in little-endian order, its
        // high ones in big-endian), else it ends where the field ends (the
        // other way round).
        let rest = u32::from(self.rest);
        // `Field::int` checked that `offset + size` does not overflow (and
        // `usize::MAX + 0` does not either).
        let end = self.offset.saturating_add(usize::from(self.size));
        let top = if let Some(word) = data.get(self.offset..).and_then(|b| b.first_chunk::<8>()) {
            if big_endian {
                u64::from_be_bytes(*word)
            } else {
                u64::from_le_bytes(*word) << rest
            }
        } else if let Some(word) = data.get(..end).and_then(|b| b.last_chunk::<8>()) {
            if big_endian {
                u64::from_be_bytes(*word) << rest
            } else {
                u64::from_le_bytes(*word)
            }
        } else {
            return self.get_short(data, big_endian);
        };
        Some(if self.signed {
            ((top as i64) >> rest) as u64
        } else {
            top >> rest
        })
    }

    /// [`IntField::get`] in a record shorter than 8 bytes.
    #[cold]
    #[inline(never)]
    fn get_short(self, data: &[u8], big_endian: bool) -> Option<u64> {
        let size = usize::from(self.size);
        // `Field::int` checked that `offset + size` does not overflow.
        let v = read_uint(data.get(self.offset..self.offset + size)?, big_endian)?;
        Some(if self.signed {
            sign_extend(v, size) as u64
        } else {
            v
        })
    }
}

impl Field {
    /// This field as an [`IntField`]: an inline scalar of 1, 2, 4 or 8
    /// bytes reads as what [`Field::decode`] gives (`Int` or `UInt`); any
    /// other field (string, array, dynamic, odd size) reads as `None`.
    pub fn int(&self) -> IntField {
        let plain = self.layout == FieldLayout::Inline
            && self.array_len.is_none()
            && !self.is_string
            && matches!(self.size, 1 | 2 | 4 | 8)
            && self.offset.checked_add(self.size).is_some();
        if !plain {
            return IntField::default();
        }
        IntField {
            offset: self.offset,
            size: self.size as u8,
            rest: 64 - 8 * self.size as u8,
            signed: self.signed,
        }
    }

    /// The bytes of this field inside `data` (a record payload), following
    /// `__data_loc` / `__rel_loc` indirection. `None` when out of bounds.
    pub fn raw<'a>(&self, data: &'a [u8], big_endian: bool) -> Option<&'a [u8]> {
        match self.layout {
            FieldLayout::Inline => data.get(self.offset..self.offset.checked_add(self.size)?),
            FieldLayout::Trailing => data.get(self.offset..),
            FieldLayout::DataLoc | FieldLayout::RelLoc => {
                let loc = read_uint(
                    data.get(self.offset..self.offset.checked_add(4)?)?,
                    big_endian,
                )?;
                let mut start = (loc & 0xffff) as usize;
                let len = (loc >> 16) as usize;
                if self.layout == FieldLayout::RelLoc {
                    start = start.checked_add(self.offset.checked_add(4)?)?;
                }
                data.get(start..start.checked_add(len)?)
            }
        }
    }

    /// Decode this field from a record payload. See [`FieldValue`] for the
    /// mapping. `None` when the record is too short for the field.
    pub fn decode<'a>(&self, data: &'a [u8], big_endian: bool) -> Option<FieldValue<'a>> {
        let raw = self.raw(data, big_endian)?;
        if self.is_string {
            return Some(FieldValue::Str(until_nul(raw)));
        }
        if let Some((_, elem)) = self.elements() {
            return Some(FieldValue::Array(
                raw.chunks_exact(elem)
                    .map(|c| scalar(c, self.signed, big_endian))
                    .collect(),
            ));
        }
        match (self.layout, self.array_len) {
            (FieldLayout::Inline, None) => Some(scalar(raw, self.signed, big_endian)),
            _ => Some(FieldValue::Bytes(raw)),
        }
    }

    /// How a fixed array that is not character data splits into elements:
    /// `Some((count, element size))` when [`Field::decode`] gives it as a
    /// [`FieldValue::Array`] (elements of 1, 2, 4 or 8 bytes, signed as the
    /// field is, that fill its size exactly); `None` for scalars, strings,
    /// dynamic and trailing arrays, and arrays that decode as
    /// [`FieldValue::Bytes`].
    pub fn elements(&self) -> Option<(usize, usize)> {
        if self.is_string || self.layout != FieldLayout::Inline {
            return None;
        }
        let n = match self.array_len? {
            0 if self.size == 0 => return None,
            // `[]` with a size (a kprobe's `u8 head[]`, size 4): as many
            // elements as the type's width goes into the size; one when the
            // type does not say its width.
            0 => fixed_width(&self.type_name)
                .filter(|w| self.size >= *w)
                .map_or(1, |w| self.size / w),
            n => n,
        };
        let elem = self.size / n;
        (matches!(elem, 1 | 2 | 4 | 8) && elem * n == self.size).then_some((n, elem))
    }
}

/// The width in bytes of a fixed-width integer type (`u8`, `s16`, `u32`,
/// `s64`, ...) or of `char`; `None` for any other type, whose width depends
/// on the machine (`long`) or is not an integer's.
fn fixed_width(type_name: &str) -> Option<usize> {
    match type_name.trim() {
        "u8" | "s8" | "char" | "unsigned char" | "signed char" => Some(1),
        "u16" | "s16" => Some(2),
        "u32" | "s32" => Some(4),
        "u64" | "s64" => Some(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\
\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc char[] filename;\toffset:28;\tsize:4;\tsigned:0;\n\
\tfield:const char * ptr;\toffset:32;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long caller[2];\toffset:40;\tsize:16;\tsigned:0;\n\
\tfield:char buf[];\toffset:56;\tsize:0;\tsigned:0;\n\
\n\
print fmt: \"prev_comm=%s\", REC->prev_comm\n";

    #[test]
    fn a_kprobe_array_without_a_length_is_split_by_its_type() {
        // kprobe_events' `+0(%si):u8[4]` is declared `u8 head[]`, size 4.
        let f = parse_decl("u8 head[]", 8, 4, false).unwrap();
        assert_eq!(
            f.decode(&[0, 0, 0, 0, 0, 0, 0, 0, 47, 112, 97, 121], false),
            Some(FieldValue::Array(vec![
                FieldValue::UInt(47),
                FieldValue::UInt(112),
                FieldValue::UInt(97),
                FieldValue::UInt(121)
            ]))
        );
        // A type of no fixed width, or one wider than the size: one element.
        let f = parse_decl("u64 odd[]", 8, 4, false).unwrap();
        assert_eq!(
            f.decode(&[0; 12], false),
            Some(FieldValue::Array(vec![FieldValue::UInt(0)]))
        );
    }

    #[test]
    fn parses_fields() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        assert_eq!(f.id, 372);
        assert_eq!(f.name, "sched_switch");
        assert_eq!(f.common_fields.len(), 4);
        assert_eq!(f.fields.len(), 6);
        let c = f.field("prev_comm").unwrap();
        assert_eq!(
            (c.offset, c.size, c.array_len, c.is_string),
            (8, 16, Some(16), true)
        );
        let l = f.field("filename").unwrap();
        assert_eq!(l.layout, FieldLayout::DataLoc);
        assert!(l.is_string);
        assert_eq!(l.type_name, "__data_loc char[]");
        let p = f.field("ptr").unwrap();
        assert!(p.is_pointer && !p.is_string);
        assert_eq!(p.type_name, "const char *");
        assert_eq!(f.field("buf").unwrap().layout, FieldLayout::Trailing);
        assert_eq!(f.print_fmt, "\"prev_comm=%s\", REC->prev_comm");
    }

    #[test]
    fn decodes_fields() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        let mut d = vec![0u8; 64];
        d[0..2].copy_from_slice(&372u16.to_le_bytes());
        d[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        d[8..12].copy_from_slice(b"bash");
        d[24..28].copy_from_slice(&(-1i32).to_le_bytes());
        d[28..32].copy_from_slice(&(56u32 | (3 << 16)).to_le_bytes());
        d[40..48].copy_from_slice(&7u64.to_le_bytes());
        d[56] = b'h';
        d[57] = b'i';
        d[58] = 0;
        assert_eq!(
            f.field("common_pid").unwrap().decode(&d, false),
            Some(FieldValue::Int(-5))
        );
        assert_eq!(
            f.field("prev_comm").unwrap().decode(&d, false),
            Some(FieldValue::Str(b"bash"))
        );
        assert_eq!(
            f.field("prev_pid").unwrap().decode(&d, false),
            Some(FieldValue::Int(-1))
        );
        assert_eq!(
            f.field("filename").unwrap().decode(&d, false),
            Some(FieldValue::Str(b"hi"))
        );
        assert_eq!(
            f.field("caller").unwrap().decode(&d, false),
            Some(FieldValue::Array(vec![
                FieldValue::UInt(7),
                FieldValue::UInt(0)
            ]))
        );
        // Out of bounds data_loc gives None, not a panic.
        d[28..32].copy_from_slice(&(60u32 | (300 << 16)).to_le_bytes());
        assert_eq!(f.field("filename").unwrap().decode(&d, false), None);
        assert_eq!(f.field("prev_pid").unwrap().decode(&d[..10], false), None);
    }

    #[test]
    fn int_fields_read_what_decode_gives() {
        let f = EventFormat::parse("sched", SWITCH).unwrap();
        // No two neighbouring bytes alike: a read that takes a byte of the
        // field before or after shows.
        let mut d: Vec<u8> = (0..64u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        d[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        d[8..12].copy_from_slice(b"bash");
        d[24..28].copy_from_slice(&(-1i32).to_le_bytes());
        d[28..32].copy_from_slice(&(56u32 | (3 << 16)).to_le_bytes());
        d[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        d[2] = 0x81;
        for big in [false, true] {
            // Every length: a field read with 8 bytes from its offset on,
            // one read closer to the end, and one that does not fit.
            for n in 0..=d.len() {
                let data = &d[..n];
                for fld in f.fields.iter().chain(&f.common_fields) {
                    let want = match fld.decode(data, big) {
                        Some(FieldValue::Int(v)) => Some(v as u64),
                        Some(FieldValue::UInt(v)) => Some(v),
                        _ => None,
                    };
                    assert_eq!(fld.int().get(data, big), want, "{}", fld.name);
                }
            }
        }
        assert_eq!(
            f.field("prev_pid").unwrap().int().get(&d, false),
            Some(u64::MAX)
        );
        assert_eq!(
            f.field("common_flags").unwrap().int().get(&d, false),
            Some(0x81)
        );
    }

    #[test]
    fn huge_offsets_do_not_overflow() {
        let t = format!(
            "name: x\nID: 1\nformat:\n\tfield:int a;\toffset:{m};\tsize:{m};\tsigned:1;\n\
\tfield:__rel_loc char[] b;\toffset:{m};\tsize:4;\tsigned:0;\n\
\tfield:u32 c[{m}];\toffset:0;\tsize:{m};\tsigned:0;\n",
            m = usize::MAX
        );
        let f = EventFormat::parse("x", &t).unwrap();
        let d = [0xffu8; 64];
        for fld in f.fields.iter().chain(&f.common_fields) {
            let _ = fld.decode(&d, false);
            let _ = fld.decode(&d, true);
            assert_eq!(fld.int().get(&d, false), None);
        }
    }

    #[test]
    fn rejects_garbage() {
        assert!(EventFormat::parse("x", "name: a\nformat:\n").is_err());
        assert!(EventFormat::parse("x", "name: a\nID: 99999999\n").is_err());
        assert!(
            EventFormat::parse(
                "x",
                "name: a\nID: 1\nformat:\n\tfield:int;\toffset:0;\tsize:4;\n"
            )
            .is_err()
        );
    }
}
