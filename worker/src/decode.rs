//! Bytes that are a feed under a wrapping the server did not declare, unwrapped before
//! parsing: a gzip stream served without `Content-Encoding: gzip` (a static `.xml.gz`, or a
//! cache that stored the compressed body), and UTF-16 text without a byte-order mark (which
//! the XML parser cannot recognise). Neither can be a feed as it stands, so unwrapping never
//! changes a document that parses.

use std::borrow::Cow;
use std::io::Read;

/// Largest document a gzip stream is inflated to: the fetcher's own body limit, so a gzip
/// bomb without the header stops where one with it would.
pub const MAX_INFLATED_BYTES: usize = 10 << 20;

/// What [`unwrap`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwrapped {
    /// Nothing: the bytes are used as they are.
    None,
    /// A gzip stream was inflated.
    Gzip,
    /// UTF-16 without a byte-order mark was re-encoded as UTF-8.
    Utf16,
}

/// The document inside `body`, and what was undone to get it. A gzip stream that does not
/// inflate, or inflates past [`MAX_INFLATED_BYTES`], is left as it is (and will be refused
/// as malformed).
pub fn unwrap(body: &[u8]) -> (Cow<'_, [u8]>, Unwrapped) {
    if body.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        let read = flate2::read::MultiGzDecoder::new(body)
            .take(MAX_INFLATED_BYTES as u64 + 1)
            .read_to_end(&mut out);
        if read.is_ok() && out.len() <= MAX_INFLATED_BYTES {
            let (inner, _) = unwrap_utf16(&out);
            return (Cow::Owned(inner.into_owned()), Unwrapped::Gzip);
        }
        return (Cow::Borrowed(body), Unwrapped::None);
    }
    unwrap_utf16(body)
}

/// UTF-16 without a BOM, recognised the way XML's own autodetection does: the first
/// character is `<`, so the first two bytes are `<\0` (little-endian) or `\0<` (big-endian).
fn unwrap_utf16(body: &[u8]) -> (Cow<'_, [u8]>, Unwrapped) {
    let encoding = match body {
        [b'<', 0, c, 0, ..] if *c != 0 => encoding_rs::UTF_16LE,
        [0, b'<', 0, c, ..] if *c != 0 => encoding_rs::UTF_16BE,
        _ => return (Cow::Borrowed(body), Unwrapped::None),
    };
    let (text, _) = encoding.decode_without_bom_handling(body);
    // The declaration still says UTF-16; the bytes are now UTF-8.
    let text = declared_utf8(&text);
    (Cow::Owned(text.into_bytes()), Unwrapped::Utf16)
}

/// `text` with the encoding of its XML declaration, if any, set to UTF-8.
fn declared_utf8(text: &str) -> String {
    let Some(decl_end) = text.starts_with("<?xml").then(|| text.find("?>")).flatten() else {
        return text.to_string();
    };
    let decl = &text[..decl_end];
    let Some(at) = decl.find("encoding=") else {
        return text.to_string();
    };
    let value_start = at + "encoding=".len();
    let quote = decl[value_start..].chars().next();
    let Some(q @ ('"' | '\'')) = quote else {
        return text.to_string();
    };
    let Some(len) = decl[value_start + 1..].find(q) else {
        return text.to_string();
    };
    format!(
        "{}{q}UTF-8{q}{}",
        &text[..value_start],
        &text[value_start + 1 + len + 1..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const DOC: &str = r#"<?xml version="1.0" encoding="utf-16"?><rss version="2.0"><channel><title>é</title></channel></rss>"#;

    fn utf16(le: bool) -> Vec<u8> {
        DOC.encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect()
    }

    #[test]
    fn utf16_without_a_bom_becomes_utf8_with_its_declaration() {
        let want = DOC.replace("\"utf-16\"", "\"UTF-8\"");
        for le in [true, false] {
            let bytes = utf16(le);
            let (out, how) = unwrap(&bytes);
            assert_eq!(how, Unwrapped::Utf16);
            assert_eq!(String::from_utf8(out.into_owned()).unwrap(), want);
        }
        // UTF-8, and UTF-16 with a BOM (the parser reads those itself), are left alone.
        assert_eq!(unwrap(DOC.as_bytes()).1, Unwrapped::None);
        let mut bom = vec![0xff, 0xfe];
        bom.extend(utf16(true));
        assert_eq!(unwrap(&bom).1, Unwrapped::None);
    }

    #[test]
    fn gzip_without_its_header_is_inflated_within_the_limit() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(DOC.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        let (out, how) = unwrap(&gz);
        assert_eq!((out.as_ref(), how), (DOC.as_bytes(), Unwrapped::Gzip));
        // A bomb: 11 MiB of zeros in a few KB stops at the limit and is left as it was.
        let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        bomb.write_all(&vec![b' '; MAX_INFLATED_BYTES + (1 << 20)])
            .unwrap();
        let bomb = bomb.finish().unwrap();
        assert!(bomb.len() < 64 << 10);
        let (out, how) = unwrap(&bomb);
        assert_eq!((out.len(), how), (bomb.len(), Unwrapped::None));
        // Truncated gzip: left as it was.
        assert_eq!(unwrap(&gz[..gz.len() / 2]).1, Unwrapped::None);
    }
}
