//! Appending the short pieces a listing line is made of (line heads, name
//! columns, literal text, comms) to a buffer with a fixed-size copy each,
//! which the compiler inlines, instead of a `memcpy` call per piece.

/// The largest fixed-size copy: what one or two vector moves do.
const COPY: usize = 32;

/// Appends `src[..len]` (all of `src` if it is shorter). When `src` holds
/// at least 16 (or [`COPY`]) bytes and `len` is at most that, it copies that
/// many and drops the extra ones: one fixed-size copy.
#[inline]
pub(crate) fn push_prefix(out: &mut Vec<u8>, src: &[u8], len: usize) {
    let end = out.len() + len.min(src.len());
    if len <= 16
        && let Some(chunk) = src.first_chunk::<16>()
    {
        out.extend_from_slice(chunk);
    } else if len <= COPY
        && let Some(chunk) = src.first_chunk::<COPY>()
    {
        out.extend_from_slice(chunk);
    } else {
        out.extend_from_slice(src.get(..len).unwrap_or(src));
    }
    out.truncate(end);
}

/// The bytes of `data` from where `part`, a slice of it, starts to `data`'s
/// end (for [`push_prefix`] to copy a fixed size past `part`); `part` itself
/// when it is not a slice of `data`.
#[inline]
pub(crate) fn rest_from<'d>(data: &'d [u8], part: &'d [u8]) -> &'d [u8] {
    let start = (part.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
    match data.get(start..) {
        Some(rest) if rest.as_ptr() == part.as_ptr() && rest.len() >= part.len() => rest,
        _ => part,
    }
}

/// Text made once and appended to many lines: stored with [`COPY`] spare
/// bytes after it, so that [`Text::push_to`] always copies a fixed size
/// when it is short.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    /// The text, then zeros up to at least [`COPY`] bytes.
    bytes: Box<[u8]>,
    len: usize,
}

impl Text {
    /// `text`, padded for [`Text::push_to`].
    pub(crate) fn new(text: &[u8]) -> Text {
        let mut bytes = text.to_vec();
        bytes.resize(text.len().max(COPY), 0);
        Text {
            bytes: bytes.into_boxed_slice(),
            len: text.len(),
        }
    }

    /// Appends the text to `out`.
    #[inline]
    pub(crate) fn push_to(&self, out: &mut Vec<u8>) {
        push_prefix(out, &self.bytes, self.len);
    }
}
