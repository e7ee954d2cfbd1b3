//! A fallback pre-pass for documents a reader shows items for but the feed parser reads as
//! empty: older or mislabelled formats are rewritten into the nearest format the parser
//! knows, and the document is parsed again.
//!
//! The parser (feed-rs) stays the core: it matches elements by namespace, so a feed in a
//! namespace it does not know parses to an empty feed rather than failing. The rewrites are
//! those of formats seen in the wild with a well-defined modern equivalent:
//!
//! * Atom 0.3 (`http://purl.org/atom/ns#`, and the drafts' `…#draft-ietf-atompub-format-NN`)
//!   → Atom 1.0, renaming the 0.3-only elements
//!   `issued`/`modified`/`tagline`/`copyright` to `published`/`updated`/`subtitle`/`rights`;
//! * the Atom 1.0 namespace written in another letter case → the exact URI;
//! * RSS 2.0 under the old UserLand namespace (`http://backend.userland.com/rss2`) → RSS 2.0
//!   without a namespace;
//! * RSS 0.90 (`http://my.netscape.com/rdf/simple/0.9/`) → RSS 1.0, its direct successor;
//! * `<rss>` of version 0.93 or 0.94, or with no `version` at all → version 2.0: the parser
//!   refuses the whole document otherwise, and 0.93/0.94 are the drafts 2.0 grew from (their
//!   elements are a subset of 2.0's, with the same meaning).
//!
//! * a `<rss>` whose items sit directly under it, with no `<channel>` → wrapped in one;
//! * an `<rdf:RDF>` with no default namespace → RSS 1.0's declared on it;
//! * RSS 1.1 (`http://purl.org/net/rss1.1#`) → RSS 2.0: its `Channel` and `items`
//!   collection become `<rss><channel>` with the items inside;
//!
//! and repairs that cost one attribute, not the document:
//!
//! * a text construct's `type` the parser does not accept (`text/plain`,
//!   `application/xhtml+xml`, `image/jpeg`, empty; `text/html` on `media:title`) → the
//!   equivalent short name, or no `type` (plain text);
//! * inline Atom `content` in an XML type the parser refuses or in no MIME type (`xml`,
//!   `markdown`) → plain text; Atom `content` with both `src` and a body → the body;
//! * RSS 1.0 items written inside `<channel>` → after it, where RSS 1.0 has them;
//! * an RSS 1.0 `<item rdf:about="…">` with no `<link>` → the `rdf:about` URI as its link,
//!   so it is read (the parser drops link-less RSS 1.0 items) and keeps that stable id;
//! * an `&` that starts no entity or character reference → `&amp;` (outside CDATA);
//! * a JSON Feed with the `http://` version URL, `tags` given as one string, or an id or
//!   URL given as a number → the specification's form.
//!
//! The rewrite runs only after a first parse was refused, or left item-like elements unread,
//! so documents that parse whole are never touched.

/// The rewritten document, or `None` when no rewrite applies.
pub fn normalise(body: &[u8]) -> Option<Vec<u8>> {
    if let Some(json) = json_feed(body) {
        return Some(json);
    }
    let mut out = body.to_vec();
    let mut changed = rss11_to_rss2(&mut out);
    if let Some(i) = find(&out, b"http://purl.org/atom/ns#") {
        // The URI whole: the drafts between 0.3 and 1.0 appended their name to it
        // (`…/ns#draft-ietf-atompub-format-08`).
        let end = out[i..]
            .iter()
            .position(|c| matches!(c, b'"' | b'\'' | b'>') || c.is_ascii_whitespace())
            .map_or(out.len(), |p| i + p);
        out.splice(i..end, b"http://www.w3.org/2005/Atom".iter().copied());
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
    changed |= userland_prefix(&mut out);
    if let Some(i) = find(&out, b"http://my.netscape.com/rdf/simple/0.9/") {
        out.splice(i..i + 38, b"http://purl.org/rss/1.0/".iter().copied());
        changed = true;
    }
    changed |= rss_version_to_2(&mut out);
    changed |= rdf_default_namespace(&mut out);
    changed |= wrap_channel(&mut out);
    changed |= text_types(&mut out);
    changed |= content_src_with_body(&mut out);
    changed |= rdf_items_out_of_channel(&mut out);
    changed |= rdf_about_links(&mut out);
    changed |= escape_stray_ampersands(&mut out);
    changed.then_some(out)
}

/// RSS 2.0 under the UserLand namespace bound to a prefix (`<r:rss xmlns:r="…/rss2">`):
/// the declaration goes and the prefix is taken off every element name.
fn userland_prefix(doc: &mut Vec<u8>) -> bool {
    const DECL: &[u8] = b"=\"http://backend.userland.com/rss2\"";
    let Some(at) = find(doc, DECL) else {
        return false;
    };
    // ` xmlns:PFX` right before the value.
    let Some(colon) = doc[..at].iter().rposition(|&c| c == b':') else {
        return false;
    };
    let Some(ws) = doc[..colon].iter().rposition(|c| c.is_ascii_whitespace()) else {
        return false;
    };
    if &doc[ws + 1..colon] != b"xmlns" {
        return false;
    }
    let prefix = doc[colon + 1..at].to_vec();
    if prefix.is_empty() {
        return false;
    }
    doc.drain(ws..at + DECL.len());
    let mut open = b"<".to_vec();
    open.extend_from_slice(&prefix);
    open.push(b':');
    let mut close = b"</".to_vec();
    close.extend_from_slice(&prefix);
    close.push(b':');
    let mut out = Vec::with_capacity(doc.len());
    let mut i = 0;
    while i < doc.len() {
        if doc[i..].starts_with(&close) {
            out.extend_from_slice(b"</");
            i += close.len();
        } else if doc[i..].starts_with(&open) {
            out.push(b'<');
            i += open.len();
        } else {
            out.push(doc[i]);
            i += 1;
        }
    }
    *doc = out;
    true
}

/// A start tag: where it begins (`<`) and ends (after `>`), and its name.
struct StartTag {
    start: usize,
    end: usize,
    name: std::ops::Range<usize>,
}

/// Every start tag of `doc` (comments, CDATA, declarations, processing instructions and
/// end tags skipped), in order. `>` inside quoted attribute values does not end a tag.
fn start_tags(doc: &[u8]) -> Vec<StartTag> {
    let mut tags = Vec::new();
    let mut i = 0;
    while let Some(lt) = memchr::memchr(b'<', &doc[i..]).map(|p| p + i) {
        let rest = &doc[lt..];
        let skip_to = |end: &[u8]| find(rest, end).map(|p| lt + p + end.len());
        let next = if rest.starts_with(b"<!--") {
            skip_to(b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            skip_to(b"]]>")
        } else if rest.starts_with(b"<?") {
            skip_to(b"?>")
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") {
            skip_to(b">")
        } else {
            let name_end = rest[1..]
                .iter()
                .position(|c| c.is_ascii_whitespace() || matches!(c, b'>' | b'/'))
                .map_or(rest.len(), |p| p + 1);
            tag_end(rest, name_end).map(|e| {
                if name_end > 1 {
                    tags.push(StartTag {
                        start: lt,
                        end: lt + e,
                        name: lt + 1..lt + name_end,
                    });
                }
                lt + e
            })
        };
        match next {
            Some(n) => i = n,
            None => break,
        }
    }
    tags
}

/// The index after the `>` closing a tag whose attributes start at `from` (`>` inside quoted
/// values does not close it).
pub(crate) fn tag_end(doc: &[u8], from: usize) -> Option<usize> {
    let mut quote = None;
    for (k, &c) in doc.iter().enumerate().skip(from) {
        match (quote, c) {
            (None, b'"' | b'\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, b'>') => return Some(k + 1),
            _ => {}
        }
    }
    None
}

/// Attribute `name` of the start tag `tag`: the range of the whole attribute with the
/// white space before it, and the range of its value.
fn attribute(
    doc: &[u8],
    tag: &StartTag,
    name: &[u8],
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let body = &doc[tag.name.end..tag.end];
    let mut from = 0;
    while let Some(p) = find(&body[from..], name).map(|p| p + from) {
        from = p + name.len();
        if p == 0 || !body[p - 1].is_ascii_whitespace() {
            continue;
        }
        let after = &body[p + name.len()..];
        let Some(eq) = after.iter().position(|c| !c.is_ascii_whitespace()) else {
            continue;
        };
        if after[eq] != b'=' {
            continue;
        }
        let q = after[eq + 1..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())?
            + eq
            + 1;
        let quote = after[q];
        if quote != b'"' && quote != b'\'' {
            continue;
        }
        let len = memchr::memchr(quote, &after[q + 1..])?;
        let value_start = tag.name.end + p + name.len() + q + 1;
        let ws = body[..p]
            .iter()
            .rposition(|c| !c.is_ascii_whitespace())
            .map_or(0, |k| k + 1);
        return Some((
            tag.name.end + ws..value_start + len + 1,
            value_start..value_start + len,
        ));
    }
    None
}

/// Applies `(range, replacement)` edits, given in ascending order and not overlapping.
/// One pass over the document, so a document full of repairs stays linear.
fn apply(doc: &mut Vec<u8>, edits: Vec<(std::ops::Range<usize>, Vec<u8>)>) -> bool {
    if edits.is_empty() {
        return false;
    }
    let grow: usize = edits.iter().map(|(_, w)| w.len()).sum();
    let mut out = Vec::with_capacity(doc.len() + grow);
    let mut at = 0;
    for (range, with) in edits {
        out.extend_from_slice(&doc[at..range.start]);
        out.extend_from_slice(&with);
        at = range.end;
    }
    out.extend_from_slice(&doc[at..]);
    *doc = out;
    true
}

/// Text constructs whose `type` the parser checks, by local name.
const TEXT_CONSTRUCTS: [&[u8]; 9] = [
    b"title",
    b"subtitle",
    b"summary",
    b"rights",
    b"content",
    b"tagline",
    b"copyright",
    b"info",
    b"description",
];

/// Rewrites `type` values the parser refuses on text constructs (see the module doc).
/// Media RSS (`media:`) takes `plain`/`html`; Atom takes `text`/`html`/`xhtml`, and its
/// `content` any MIME type but XHTML under its long name.
fn text_types(doc: &mut Vec<u8>) -> bool {
    let mut edits = Vec::new();
    for tag in start_tags(doc) {
        let name = &doc[tag.name.clone()];
        let (prefix, local) = match memchr::memchr(b':', name) {
            Some(c) => (&name[..c], &name[c + 1..]),
            None => (&b""[..], name),
        };
        if !TEXT_CONSTRUCTS.contains(&local) {
            continue;
        }
        let Some((whole, value)) = attribute(doc, &tag, b"type") else {
            continue;
        };
        let v = doc[value.clone()].to_ascii_lowercase();
        let media = prefix == b"media";
        let keep: &[&[u8]] = if media {
            &[b"plain", b"html"]
        } else {
            &[b"text", b"html", b"xhtml", b"text/html"]
        };
        if keep.contains(&v.as_slice()) {
            continue;
        }
        let inline = attribute(doc, &tag, b"src").is_none();
        let replacement: Option<&[u8]> = match (media, v.as_slice()) {
            (true, b"text/html") => Some(b"html"),
            (false, b"application/xhtml+xml") => Some(b"xhtml"),
            // Inline Atom content in an XML type the parser refuses (`text/xml`,
            // `application/atom+xml`) or in no MIME type at all (`xml`, `markdown`): read
            // as plain text, which keeps the entry. Given by `src`, the type describes the
            // remote resource and stays.
            (false, _)
                if local == b"content"
                    && inline
                    && (!v.contains(&b'/') || v.ends_with(b"/xml") || v.ends_with(b"+xml")) =>
            {
                Some(b"")
            }
            // Atom content may carry any MIME type the parser can read as text.
            (false, _) if local == b"content" && !v.is_empty() && v != b"text/plain" => None,
            _ => Some(b""),
        };
        match replacement {
            None => {}
            // Drop ` type="…"` whole: the parser's default is plain text.
            Some(b"") => edits.push((whole, Vec::new())),
            Some(r) => edits.push((value, r.to_vec())),
        }
    }
    apply(doc, edits)
}

/// Atom `content` with both a `src` and a body (RFC 4287 wants it empty then): the parser
/// refuses the whole document; a reader shows the body, so `src` goes.
fn content_src_with_body(doc: &mut Vec<u8>) -> bool {
    let mut edits = Vec::new();
    for tag in start_tags(doc) {
        let name = &doc[tag.name.clone()];
        let local = memchr::memrchr(b':', name).map_or(name, |c| &name[c + 1..]);
        if local != b"content" || doc[tag.end - 2] == b'/' {
            continue;
        }
        let Some((whole, _)) = attribute(doc, &tag, b"src") else {
            continue;
        };
        let body = doc[tag.end..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map(|p| &doc[tag.end + p..]);
        if body.is_some_and(|b| !b.starts_with(b"</")) {
            edits.push((whole, Vec::new()));
        }
    }
    apply(doc, edits)
}

/// RSS 1.0 `<item>`s written inside `<channel>` (they are its siblings under `<rdf:RDF>`):
/// the parser reads none of them. The channel is closed before its first item.
fn rdf_items_out_of_channel(doc: &mut Vec<u8>) -> bool {
    let tags = start_tags(doc);
    if !tags
        .first()
        .is_some_and(|t| doc[t.name.clone()].ends_with(b"RDF"))
    {
        return false;
    }
    let Some(channel) = tags.iter().find(|t| &doc[t.name.clone()] == b"channel") else {
        return false;
    };
    let Some(close) = find(&doc[channel.end..], b"</channel>").map(|p| channel.end + p) else {
        return false;
    };
    let Some(first_item) = tags
        .iter()
        .find(|t| t.start > channel.end && t.start < close && &doc[t.name.clone()] == b"item")
    else {
        return false;
    };
    let at = first_item.start;
    doc.drain(close..close + b"</channel>".len());
    doc.splice(at..at, b"</channel>".iter().copied());
    true
}

/// An `<rdf:RDF>` document with no default namespace (its `channel` and `item` in no
/// namespace at all): RSS 1.0's namespace is declared on the root, as its authors meant.
fn rdf_default_namespace(doc: &mut Vec<u8>) -> bool {
    let tags = start_tags(doc);
    let Some(root) = tags.first().filter(|t| &doc[t.name.clone()] == b"rdf:RDF") else {
        return false;
    };
    if attribute(doc, root, b"xmlns").is_some() {
        return false;
    }
    let has_items = tags
        .iter()
        .any(|t| matches!(&doc[t.name.clone()], b"item" | b"channel"));
    if !has_items {
        return false;
    }
    let at = root.name.end;
    doc.splice(
        at..at,
        b" xmlns=\"http://purl.org/rss/1.0/\"".iter().copied(),
    );
    true
}

/// An `<rss>` holding items with no `<channel>`: the items are wrapped in one.
fn wrap_channel(doc: &mut Vec<u8>) -> bool {
    if find(doc, b"<channel").is_some() {
        return false;
    }
    let tags = start_tags(doc);
    let Some(rss) = tags.iter().find(|t| &doc[t.name.clone()] == b"rss") else {
        return false;
    };
    if doc[rss.end - 2] == b'/' {
        return false;
    }
    let Some(close) = memchr::memmem::rfind(doc, b"</rss>") else {
        return false;
    };
    let open_end = rss.end;
    doc.splice(close..close, b"</channel>".iter().copied());
    doc.splice(open_end..open_end, b"<channel>".iter().copied());
    true
}

/// RSS 1.0 items with `rdf:about` and no `<link>` get the URI as their link.
fn rdf_about_links(doc: &mut Vec<u8>) -> bool {
    if find(doc, b"http://purl.org/rss/1.0/").is_none() {
        return false;
    }
    let mut edits = Vec::new();
    let tags = start_tags(doc);
    // One pass over the end tags and one over the start tags, both moving forward only: an
    // item ends at its `</item>` or, when the end tag is missing, where the next item
    // starts, so a document of unclosed items costs linear time, not quadratic.
    let closes: Vec<usize> = memchr::memmem::find_iter(doc, b"</item>").collect();
    let starts: Vec<usize> = tags
        .iter()
        .filter(|t| &doc[t.name.clone()] == b"item")
        .map(|t| t.start)
        .collect();
    let (mut close_at, mut start_at) = (0, 0);
    for (n, tag) in tags.iter().enumerate() {
        if &doc[tag.name.clone()] != b"item" || doc[tag.end - 2] == b'/' {
            continue;
        }
        let Some((_, about)) = attribute(doc, tag, b"rdf:about") else {
            continue;
        };
        while close_at < closes.len() && closes[close_at] < tag.end {
            close_at += 1;
        }
        while start_at < starts.len() && starts[start_at] <= tag.start {
            start_at += 1;
        }
        let item_end = closes
            .get(close_at)
            .copied()
            .unwrap_or(doc.len())
            .min(starts.get(start_at).copied().unwrap_or(doc.len()));
        let has_link = tags[n + 1..]
            .iter()
            .take_while(|t| t.start < item_end)
            .any(|t| &doc[t.name.clone()] == b"link");
        if !has_link && !about.is_empty() {
            let mut link = b"<link>".to_vec();
            link.extend_from_slice(&doc[about]);
            link.extend_from_slice(b"</link>");
            edits.push((tag.end..tag.end, link));
        }
    }
    apply(doc, edits)
}

/// `&` that starts no entity or character reference becomes `&amp;`; CDATA is left alone.
fn escape_stray_ampersands(doc: &mut Vec<u8>) -> bool {
    let mut edits = Vec::new();
    let mut i = 0;
    while let Some(p) = memchr::memchr2(b'&', b'<', &doc[i..]).map(|p| p + i) {
        if doc[p] == b'<' {
            i = if doc[p..].starts_with(b"<![CDATA[") {
                find(&doc[p..], b"]]>").map_or(doc.len(), |e| p + e + 3)
            } else {
                p + 1
            };
            continue;
        }
        if !is_reference(&doc[p..]) {
            edits.push((p + 1..p + 1, b"amp;".to_vec()));
        }
        i = p + 1;
    }
    apply(doc, edits)
}

/// Whether `s` (starting at `&`) begins `&name;`, `&#digits;` or `&#xhex;`.
fn is_reference(s: &[u8]) -> bool {
    let body = &s[1..s.len().min(64)];
    let Some(semi) = memchr::memchr(b';', body) else {
        return false;
    };
    let r = &body[..semi];
    match r {
        [b'#', b'x' | b'X', hex @ ..] => !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit),
        [b'#', dec @ ..] => !dec.is_empty() && dec.iter().all(u8::is_ascii_digit),
        [first, rest @ ..] => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'))
        }
        [] => false,
    }
}

/// RSS 1.1: `<Channel xmlns="http://purl.org/net/rss1.1#" …>` with `<items>` holding the
/// items becomes `<rss version="2.0"><channel …>` with the items directly inside.
fn rss11_to_rss2(doc: &mut Vec<u8>) -> bool {
    const NS: &[u8] = b"http://purl.org/net/rss1.1#";
    if find(doc, NS).is_none() {
        return false;
    }
    let tags = start_tags(doc);
    let Some(root) = tags.iter().find(|t| &doc[t.name.clone()] == b"Channel") else {
        return false;
    };
    let mut edits: Vec<(std::ops::Range<usize>, Vec<u8>)> = Vec::new();
    // The root's attributes stay (prefix declarations), minus the RSS 1.1 default namespace.
    let mut open = b"<rss version=\"2.0\"><channel".to_vec();
    let attrs = doc[root.name.end..root.end].to_vec();
    open.extend(strip_default_ns(&attrs, NS));
    edits.push((root.start..root.end, open));
    for t in &tags {
        if &doc[t.name.clone()] == b"items" && doc[t.end - 2] != b'/' {
            edits.push((t.start..t.end, Vec::new()));
        }
    }
    let mut closes: Vec<(std::ops::Range<usize>, Vec<u8>)> = Vec::new();
    let mut from = 0;
    while let Some(p) = find(&doc[from..], b"</items>").map(|p| p + from) {
        closes.push((p..p + 8, Vec::new()));
        from = p + 8;
    }
    if let Some(p) = memchr::memmem::rfind(doc, b"</Channel>") {
        closes.push((p..p + 10, b"</channel></rss>".to_vec()));
    }
    edits.extend(closes);
    edits.sort_by_key(|e| e.0.start);
    apply(doc, edits)
}

/// `attrs` without ` xmlns="ns"` (either quote).
fn strip_default_ns(attrs: &[u8], ns: &[u8]) -> Vec<u8> {
    for q in [b'"', b'\''] {
        let mut pat = b" xmlns=".to_vec();
        pat.push(q);
        pat.extend_from_slice(ns);
        pat.push(q);
        if let Some(p) = find(attrs, &pat) {
            let mut out = attrs[..p].to_vec();
            out.extend_from_slice(&attrs[p + pat.len()..]);
            return out;
        }
    }
    attrs.to_vec()
}

/// A JSON Feed in a form seen in the wild but refused by a strict reading, rewritten to the
/// specification's: the `http://` version URL, `tags` as one string, ids and URLs given as
/// numbers. `None` if `body` is not a JSON object or nothing needed changing.
fn json_feed(body: &[u8]) -> Option<Vec<u8>> {
    let first = body.iter().find(|c| !c.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    let mut v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let obj = v.as_object_mut()?;
    let mut changed = false;
    if let Some(serde_json::Value::String(version)) = obj.get_mut("version") {
        if let Some(rest) = version.strip_prefix("http://jsonfeed.org/") {
            *version = format!("https://jsonfeed.org/{rest}");
            changed = true;
        }
    }
    let as_string = |x: &mut serde_json::Value| -> bool {
        if x.is_number() || x.is_boolean() {
            *x = serde_json::Value::String(x.to_string());
            return true;
        }
        false
    };
    for key in ["home_page_url", "feed_url"] {
        if let Some(x) = obj.get_mut(key) {
            changed |= as_string(x);
        }
    }
    if let Some(serde_json::Value::Array(items)) = obj.get_mut("items") {
        for item in items.iter_mut().filter_map(|i| i.as_object_mut()) {
            for key in ["id", "url", "external_url"] {
                if let Some(x) = item.get_mut(key) {
                    changed |= as_string(x);
                }
            }
            if let Some(tags) = item.get_mut("tags") {
                match tags {
                    serde_json::Value::String(t) => {
                        *tags = serde_json::Value::Array(vec![serde_json::Value::String(
                            std::mem::take(t),
                        )]);
                        changed = true;
                    }
                    serde_json::Value::Array(_) => {}
                    _ => {
                        *tags = serde_json::Value::Array(Vec::new());
                        changed = true;
                    }
                }
            }
        }
    }
    if !changed {
        return None;
    }
    serde_json::to_vec(&v).ok()
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

/// Where `needle` first occurs in `hay`, ASCII case ignored.
pub(crate) fn find_ignore_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
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
