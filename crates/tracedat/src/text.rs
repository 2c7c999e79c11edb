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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_cut_where_asked() {
        let src: Vec<u8> = (0..40).collect();
        for len in 0..=40 {
            for from in [0, 5, 20, 30] {
                let mut out = vec![7];
                push_prefix(&mut out, &src[from..], len);
                let want = &src[from..(from + len).min(40)];
                assert_eq!(&out[1..], want, "len {len} from {from}");
            }
        }
        for len in [0, 1, 16, 31, 32, 33, 70] {
            let text: Vec<u8> = (0..len as u8).collect();
            let mut out = vec![7];
            Text::new(&text).push_to(&mut out);
            assert_eq!(&out[1..], &text[..]);
        }
    }

    #[test]
    fn rest_from_reaches_the_end_of_the_data_only_for_a_slice_of_it() {
        let data = b"abc\0defghijklmnopqrstuvwxyz0123456789";
        assert_eq!(rest_from(data, &data[4..8]), &data[4..]);
        assert_eq!(rest_from(data, &data[..0]), &data[..]);
        let other = *b"defg";
        assert_eq!(rest_from(data, &other), b"defg");
    }
}
