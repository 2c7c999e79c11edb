//! Bounds-checked reading of file bytes.

use crate::Error;

/// A bounds-checked cursor over a byte region of the file (or of a
/// decompressed section). `base` is the file offset of `data[0]` used in error
/// messages; `section` names the region.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    pub data: &'a [u8],
    pub pos: usize,
    pub base: u64,
    pub big: bool,
    pub section: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], base: u64, big: bool, section: &'static str) -> Self {
        Cursor {
            data,
            pos: 0,
            base,
            big,
            section,
        }
    }

    /// File offset of the current position.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub fn err(&self, what: &str, detail: impl Into<String>) -> Error {
        Error::corrupt(format!("{}: {}", self.section, what), self.offset(), detail)
    }

    pub fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], Error> {
        let rem = self.remaining() as u64;
        if n > rem {
            return Err(Error::Truncated {
                what: format!("{}: {}", self.section, what),
                offset: self.offset(),
                need: n,
                available: rem,
            });
        }
        let n = n as usize;
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn uint(&mut self, n: usize, what: &str) -> Result<u64, Error> {
        let b = self.take(n as u64, what)?;
        crate::format::read_uint(b, self.big).ok_or_else(|| self.err(what, "bad integer size"))
    }
    pub fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16, Error> {
        Ok(self.uint(2, what)? as u16)
    }
    pub fn u32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(self.uint(4, what)? as u32)
    }
    pub fn u64(&mut self, what: &str) -> Result<u64, Error> {
        self.uint(8, what)
    }

    /// Bytes up to a NUL (consumed, not returned).
    pub fn cstr(&mut self, what: &str) -> Result<&'a [u8], Error> {
        let rest = &self.data[self.pos..];
        match rest.iter().position(|&b| b == 0) {
            Some(i) => {
                let s = &rest[..i];
                self.pos += i + 1;
                Ok(s)
            }
            None => Err(Error::Truncated {
                what: format!("{}: {} (no NUL terminator)", self.section, what),
                offset: self.offset(),
                need: rest.len() as u64 + 1,
                available: rest.len() as u64,
            }),
        }
    }

    pub fn expect(&mut self, tag: &[u8], what: &str) -> Result<(), Error> {
        let off = self.offset();
        let got = self.take(tag.len() as u64, what)?;
        if got != tag {
            return Err(Error::corrupt(
                format!("{}: {}", self.section, what),
                off,
                format!(
                    "expected {:?}, found {:?}",
                    String::from_utf8_lossy(tag),
                    String::from_utf8_lossy(got)
                ),
            ));
        }
        Ok(())
    }
}

/// Text of a byte string without a trailing NUL, lossily decoded.
pub(crate) fn text(b: &[u8]) -> String {
    let b = match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    };
    String::from_utf8_lossy(b).into_owned()
}

/// Parse an integer the way C `strtoll(s, NULL, 0)` does: optional
/// whitespace and sign, `0x` hex, leading-`0` octal or decimal, stopping at
/// the first invalid character. Saturates instead of overflowing.
pub(crate) fn parse_c_integer(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(r) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, r)
    } else if s.starts_with('0') && s.len() > 1 {
        (8, &s[1..])
    } else {
        (10, s)
    };
    let mut v: i128 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else { break };
        v = (v * radix as i128 + d as i128).min(i64::MAX as i128 + 1);
    }
    let v = if neg { -v } else { v };
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_integers() {
        assert_eq!(parse_c_integer("0x10"), 16);
        assert_eq!(parse_c_integer("-0x10\0"), -16);
        assert_eq!(parse_c_integer("  42abc"), 42);
        assert_eq!(parse_c_integer("010"), 8);
        assert_eq!(parse_c_integer("0"), 0);
        assert_eq!(parse_c_integer("zz"), 0);
        assert_eq!(parse_c_integer("0xffffffffffffffffffff"), i64::MAX);
    }

    #[test]
    fn cursor_bounds() {
        let d = [1u8, 0, 0, 0, b'a', 0];
        let mut c = Cursor::new(&d, 100, false, "test");
        assert_eq!(c.u32("x").unwrap(), 1);
        assert_eq!(c.cstr("s").unwrap(), b"a");
        let e = c.u8("y").unwrap_err().to_string();
        assert!(e.contains("offset 106"), "{e}");
        let mut c = Cursor::new(&d[..5], 0, false, "test");
        c.pos = 4;
        assert!(c.cstr("s").is_err());
    }
}
