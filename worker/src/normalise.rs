//! A fallback pre-pass for documents a reader shows items for but the feed parser reads as
//! empty: older or mislabelled formats are rewritten into the nearest format the parser
//! knows, and the document is parsed again.
//!
//! The parser (feed-rs) stays the core: it matches elements by namespace, so a feed in a
//! namespace it does not know parses to an empty feed rather than failing. The rewrites are
//! those of formats seen in the wild with a well-defined modern equivalent:
//!
//! * Atom 0.3 (`http://purl.org/atom/ns#`) → Atom 1.0, renaming the 0.3-only elements
//!   `issued`/`modified`/`tagline`/`copyright` to `published`/`updated`/`subtitle`/`rights`;
//! * the Atom 1.0 namespace written in another letter case → the exact URI;
//! * RSS 2.0 under the old UserLand namespace (`http://backend.userland.com/rss2`) → RSS 2.0
//!   without a namespace;
//! * RSS 0.90 (`http://my.netscape.com/rdf/simple/0.9/`) → RSS 1.0, its direct successor;
//! * `<rss>` of version 0.93 or 0.94, or with no `version` at all → version 2.0: the parser
//!   refuses the whole document otherwise, and 0.93/0.94 are the drafts 2.0 grew from (their
//!   elements are a subset of 2.0's, with the same meaning).
//!
//! The rewrite runs only after a first parse was refused, or found no item while the
//! document holds item-like elements, so documents that parse are never touched.

/// The rewritten document, or `None` when no rewrite applies.
pub fn normalise(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = body.to_vec();
    let mut changed = false;
    if let Some(i) = find(&out, b"http://purl.org/atom/ns#") {
        out.splice(i..i + 24, b"http://www.w3.org/2005/Atom".iter().copied());
        for (old, new) in [
            ("issued", "published"),
            ("modified", "updated"),
            ("tagline", "subtitle"),
            ("copyright", "rights"),
        ] {
            out = rename_element(&out, old, new);
        }
        changed = true;
    }
    if let Some(i) = find_ignore_case(&out, b"http://www.w3.org/2005/atom") {
        if &out[i..i + 27] != b"http://www.w3.org/2005/Atom" {
            out.splice(i..i + 27, b"http://www.w3.org/2005/Atom".iter().copied());
            changed = true;
        }
    }
    for ns in [
        &b" xmlns=\"http://backend.userland.com/rss2\""[..],
        &b" xmlns='http://backend.userland.com/rss2'"[..],
    ] {
        if let Some(i) = find(&out, ns) {
            out.drain(i..i + ns.len());
            changed = true;
        }
    }
    if let Some(i) = find(&out, b"http://my.netscape.com/rdf/simple/0.9/") {
        out.splice(i..i + 38, b"http://purl.org/rss/1.0/".iter().copied());
        changed = true;
    }
    changed |= rss_version_to_2(&mut out);
    changed.then_some(out)
}

/// Sets the `version` of the first `<rss>` start tag to 2.0 when it is 0.93, 0.94 or absent.
fn rss_version_to_2(doc: &mut Vec<u8>) -> bool {
    let mut from = 0;
    let start = loop {
        let Some(i) = find(&doc[from..], b"<rss").map(|i| i + from) else {
            return false;
        };
        // `<rss` itself, not `<rssfoo`.
        if doc
            .get(i + 4)
            .is_some_and(|&c| c.is_ascii_whitespace() || c == b'>' || c == b'/')
        {
            break i;
        }
        from = i + 4;
    };
    let Some(len) = find(&doc[start..], b">") else {
        return false;
    };
    let tag = &doc[start..start + len];
    let Some(v) = find(tag, b"version=") else {
        doc.splice(start + 4..start + 4, b" version=\"2.0\"".iter().copied());
        return true;
    };
    let value = start + v + 8;
    for old in [&b"\"0.93\""[..], b"'0.93'", b"\"0.94\"", b"'0.94'"] {
        if doc[value..].starts_with(old) {
            doc.splice(value..value + old.len(), b"\"2.0\"".iter().copied());
            return true;
        }
    }
    false
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// Renames unprefixed elements `<old …>`, `</old>` and `<old/>` to `new`.
fn rename_element(body: &[u8], old: &str, new: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 64);
    let mut i = 0;
    while i < body.len() {
        if body[i] == b'<' {
            let close = body.get(i + 1) == Some(&b'/');
            let name_at = i + 1 + usize::from(close);
            let end = name_at + old.len();
            if body.get(name_at..end) == Some(old.as_bytes())
                && matches!(
                    body.get(end),
                    Some(b' ' | b'>' | b'/' | b'\t' | b'\r' | b'\n')
                )
            {
                out.extend_from_slice(&body[i..name_at]);
                out.extend_from_slice(new.as_bytes());
                i = end;
                continue;
            }
        }
        out.push(body[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_what_it_names() {
        let atom03 = br#"<feed version="0.3" xmlns="http://purl.org/atom/ns#"><entry><issued>2003-12-13T08:29:29-04:00</issued><modified>x</modified><issuedx/></entry></feed>"#;
        let got = String::from_utf8(normalise(atom03).unwrap()).unwrap();
        assert_eq!(
            got,
            r#"<feed version="0.3" xmlns="http://www.w3.org/2005/Atom"><entry><published>2003-12-13T08:29:29-04:00</published><updated>x</updated><issuedx/></entry></feed>"#
        );
        let cased = br#"<feed xmlns="http://www.w3.org/2005/ATOM"></feed>"#;
        assert_eq!(
            normalise(cased).unwrap(),
            br#"<feed xmlns="http://www.w3.org/2005/Atom"></feed>"#.to_vec()
        );
        let userland =
            br#"<rss version="2.0" xmlns="http://backend.userland.com/rss2"><channel/></rss>"#;
        assert_eq!(
            normalise(userland).unwrap(),
            br#"<rss version="2.0"><channel/></rss>"#.to_vec()
        );
        let rss090 = br#"<rdf:RDF xmlns="http://my.netscape.com/rdf/simple/0.9/"/>"#;
        assert_eq!(
            normalise(rss090).unwrap(),
            br#"<rdf:RDF xmlns="http://purl.org/rss/1.0/"/>"#.to_vec()
        );
        assert_eq!(
            normalise(br#"<feed xmlns="http://www.w3.org/2005/Atom"/>"#),
            None
        );
        assert_eq!(normalise(b"<rss version=\"2.0\"><channel/></rss>"), None);
        assert_eq!(normalise(b"<rss version=\"0.91\"><channel/></rss>"), None);
    }

    #[test]
    fn rss_093_094_and_unversioned_become_2_0() {
        for (doc, want) in [
            (
                &br#"<?xml version="1.0"?><rss version="0.93"><channel/></rss>"#[..],
                &br#"<?xml version="1.0"?><rss version="2.0"><channel/></rss>"#[..],
            ),
            (
                br#"<rss version='0.94' xmlns:x="y"><channel/></rss>"#,
                br#"<rss version="2.0" xmlns:x="y"><channel/></rss>"#,
            ),
            (
                b"<rss><channel/></rss>",
                br#"<rss version="2.0"><channel/></rss>"#,
            ),
            (
                b"<rssx/><rss\n><channel/></rss>",
                b"<rssx/><rss version=\"2.0\"\n><channel/></rss>",
            ),
        ] {
            assert_eq!(
                String::from_utf8(normalise(doc).unwrap()).unwrap(),
                String::from_utf8(want.to_vec()).unwrap()
            );
        }
    }
}
