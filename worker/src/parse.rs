//! Feed documents to postings, with `feed-rs` doing the format work (RSS 0.9x/1.0/2.0,
//! Atom 0.3/1.0, JSON Feed).
//!
//! What this module adds on top:
//! * **Stable item ids.** An item's id is its `guid`/`id`; without one, a hash of its link
//!   and title, and without those of its summary, content and date. (The parser's own
//!   fallback is a random UUID, which would report the same item again on every fetch.)
//!   Ids are hashed to 64 bits with XXH3, whose output is fixed by its specification, so
//!   hashes survive restarts and upgrades.
//! * **Duplicates inside one document** are dropped (first occurrence kept).
//! * **A defined answer for every input**: an empty body, a document that is not a feed,
//!   and a parser failure are all [`ParseError`]s; a panic inside the parser is caught and
//!   reported as malformed instead of taking the worker down.

use feed_rs::model::{Entry, FeedType};
use std::collections::HashSet;
use xxhash_rust::xxh3::xxh3_64;

/// One item of a parsed feed.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// 64-bit hash of the item's stable id.
    pub id_hash: u64,
    /// First link of the item, if any.
    pub link: Option<String>,
    /// Title text, if any.
    pub title: Option<String>,
    /// Published (or, failing that, updated) time claimed by the feed, Unix ms.
    pub published_unix_ms: Option<i64>,
}

/// The format a document was recognised as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Atom 0.3 or 1.0.
    Atom,
    /// RSS 0.9x or 2.0.
    Rss2,
    /// RSS 1.0 (RDF).
    Rss1,
    /// RSS 0.x.
    Rss0,
    /// JSON Feed.
    Json,
}

/// A parsed feed document.
#[derive(Clone, Debug)]
pub struct ParsedFeed {
    /// Recognised format.
    pub format: Format,
    /// Items in document order, without duplicates.
    pub items: Vec<Item>,
    /// Duplicate items dropped (same id twice in one document).
    pub duplicates_dropped: usize,
    /// RSS `<ttl>`: the publisher's minimum refetch interval, minutes.
    pub ttl_minutes: Option<u32>,
    /// Item-like elements in the document (see [`item_like_elements`]): more than the items
    /// read (with duplicates) means the parser lost some.
    pub item_like: usize,
    /// Read only after rewriting an older or mislabelled format ([`crate::normalise`]).
    pub normalised: bool,
    /// The feed's own title, if it has one.
    pub title: Option<String>,
    /// The site the feed belongs to (its `alternate` or first link), if given.
    pub site_url: Option<String>,
    /// Format and version as written ([`format_seen`]).
    pub format_seen: String,
}

impl ParsedFeed {
    /// Item-like elements that did not come out as items (nor as dropped duplicates).
    pub fn items_unread(&self) -> usize {
        self.item_like
            .saturating_sub(self.items.len() + self.duplicates_dropped)
    }
}

/// Most item-like elements counted in one document (the count only has to show a loss).
const ITEM_LIKE_CAP: usize = 100_000;

/// Counts what looks like an item, independently of the parser, so that a document the
/// parser reads as empty (a format or namespace it does not know) or only partly is seen
/// as such instead of as a quiet feed: XML elements named `item` or `entry`, with or
/// without a prefix (`<item>`, `<rss:item …>`, `<atom:entry>`, not `<items>`), or the
/// members of a JSON document's `"items"` array (counted by its objects' opening braces at
/// the array's top level).
pub fn item_like_elements(body: &[u8]) -> usize {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace() && !matches!(b, 0xEF | 0xBB | 0xBF))
        .unwrap_or(body.len());
    if body.get(start) == Some(&b'{') {
        return json_items(&body[start..]);
    }
    let mut n = 0;
    for at in memchr::memchr_iter(b'<', body) {
        let rest = &body[at + 1..];
        // The local name: after an optional `prefix:`.
        let name_end = rest
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-' | b'.')))
            .unwrap_or(rest.len());
        let name = &rest[..name_end];
        let local = match name.iter().rposition(|&b| b == b':') {
            Some(i) => &name[i + 1..],
            None => name,
        };
        let delimited = matches!(
            rest.get(name_end),
            Some(b' ' | b'>' | b'/' | b'\t' | b'\r' | b'\n')
        );
        if delimited && (local == b"item" || local == b"entry") {
            n += 1;
            if n == ITEM_LIKE_CAP {
                break;
            }
        }
    }
    n
}

/// Objects at the top level of the first `"items": [ … ]` array of a JSON document.
fn json_items(body: &[u8]) -> usize {
    let Some(key) = memchr::memmem::find(body, b"\"items\"") else {
        return 0;
    };
    let rest = &body[key + 7..];
    let Some(open) = rest
        .iter()
        .position(|b| !b.is_ascii_whitespace() && *b != b':')
    else {
        return 0;
    };
    if rest[open] != b'[' {
        return 0;
    }
    let (mut depth, mut in_string, mut escaped, mut n) = (0usize, false, false, 0);
    for &b in &rest[open..] {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                if b == b'{' && depth == 1 {
                    n += 1;
                    if n == ITEM_LIKE_CAP {
                        break;
                    }
                }
                depth += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    n
}

/// Why a document yields no feed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// Zero bytes, or only whitespace.
    #[error("empty document")]
    Empty,
    /// Not recognisable as RSS, Atom or JSON Feed, or broken beyond recovery.
    #[error("malformed feed: {0}")]
    Malformed(String),
}

/// The format and version a document was written in, as far as its opening says:
/// `rss-2.0`, `rss-0.91`, `rss-1.0`, `rss-1.1`, `rss-0.90`, `atom-1.0`, `atom-0.3`,
/// `json-feed-1.1`, … (`format` is what the parser read it as, after any rewrite).
pub fn format_seen(body: &[u8], format: Format) -> String {
    let head = &body[..body.len().min(64 << 10)];
    let has = |needle: &[u8]| memchr::memmem::find(head, needle).is_some();
    match format {
        Format::Json => {
            let text = String::from_utf8_lossy(head);
            let version = text
                .split("jsonfeed.org/version/")
                .nth(1)
                .map(|r| {
                    r.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '.')
                        .collect::<String>()
                })
                .filter(|v| !v.is_empty());
            match version {
                Some(v) => format!("json-feed-{v}"),
                None => "json-feed".into(),
            }
        }
        _ if has(b"http://purl.org/net/rss1.1#") => "rss-1.1".into(),
        _ if has(b"http://my.netscape.com/rdf/simple/0.9/") => "rss-0.90".into(),
        _ if has(b"http://purl.org/atom/ns#") => "atom-0.3".into(),
        Format::Atom => "atom-1.0".into(),
        Format::Rss1 => "rss-1.0".into(),
        Format::Rss2 | Format::Rss0 => {
            // The `version` of the `<rss …>` start tag.
            let Some(at) = memchr::memmem::find(head, b"<rss") else {
                return "rss".into();
            };
            let tag = &head[at..head.len().min(at + 1024)];
            let tag = &tag[..memchr::memchr(b'>', tag).unwrap_or(tag.len())];
            let version = memchr::memmem::find(tag, b"version=").and_then(|v| {
                let rest = &tag[v + 8..];
                let q = *rest.first()?;
                let end = memchr::memchr(q, &rest[1..])?;
                std::str::from_utf8(&rest[1..1 + end])
                    .ok()
                    .map(str::to_string)
            });
            match version.filter(|v| {
                !v.is_empty() && v.len() <= 8 && v.chars().all(|c| c.is_ascii_digit() || c == '.')
            }) {
                Some(v) => format!("rss-{v}"),
                None => "rss".into(),
            }
        }
    }
}

/// Marker the id generator returns when an item has neither a link nor a title.
const NO_LINK_OR_TITLE: &str = "kairos:no-link-or-title";

/// Parses a feed document. Bytes in an undeclared wrapping (gzip, UTF-16 without a BOM)
/// are unwrapped first ([`crate::decode`]). A document the parser refuses, or reads leaving
/// item-like elements unread, is rewritten into a form the parser knows (see
/// [`crate::normalise`]) and parsed again; the second reading is kept when it reads more
/// items, and says so in `normalised`.
pub fn parse(body: &[u8]) -> Result<ParsedFeed, ParseError> {
    let (body, _) = crate::decode::unwrap(body);
    let body = body.as_ref();
    parse_document(body).map(|mut f| {
        f.format_seen = format_seen(body, f.format);
        f
    })
}

/// [`parse`] after unwrapping: the plain reading, then the rewritten one if needed.
fn parse_document(body: &[u8]) -> Result<ParsedFeed, ParseError> {
    let first = match parse_once(body) {
        Ok(first) => first,
        // Refused whole: an older RSS version, a bad attribute, a stray `&`, ...
        Err(refused @ ParseError::Malformed(_)) => {
            let Some(rewritten) = crate::normalise::normalise(body) else {
                return Err(refused);
            };
            return match parse_once(&rewritten) {
                Ok(mut second) => {
                    second.normalised = true;
                    Ok(second)
                }
                Err(_) => Err(refused),
            };
        }
        Err(e) => return Err(e),
    };
    if first.items_unread() == 0 {
        return Ok(first);
    }
    let Some(rewritten) = crate::normalise::normalise(body) else {
        return Ok(first);
    };
    match parse_once(&rewritten) {
        Ok(mut second) if second.items.len() > first.items.len() => {
            second.normalised = true;
            // The count of item-like elements is the original document's.
            second.item_like = first.item_like;
            Ok(second)
        }
        // The rewrite did not help: the first answer stands (and says what was lost).
        _ => Ok(first),
    }
}

fn parse_once(body: &[u8]) -> Result<ParsedFeed, ParseError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ParseError::Empty);
    }
    let parser = feed_rs::parser::Builder::new()
        .id_generator(|links, title, _uri| match (links.first(), title) {
            (None, None) => NO_LINK_OR_TITLE.to_string(),
            (link, title) => format!(
                "kairos:{}\n{}",
                link.map(|l| l.href.as_str()).unwrap_or(""),
                title.as_ref().map(|t| t.content.as_str()).unwrap_or("")
            ),
        })
        .build();
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse(body)));
    let feed = match parsed {
        Ok(Ok(feed)) => feed,
        Ok(Err(e)) => return Err(ParseError::Malformed(e.to_string())),
        Err(_) => {
            return Err(ParseError::Malformed(
                "the feed parser panicked on this document".into(),
            ))
        }
    };
    let format = match feed.feed_type {
        FeedType::Atom => Format::Atom,
        FeedType::RSS2 => Format::Rss2,
        FeedType::RSS1 => Format::Rss1,
        FeedType::RSS0 => Format::Rss0,
        FeedType::JSON => Format::Json,
    };
    let mut seen = HashSet::new();
    let mut items = Vec::with_capacity(feed.entries.len());
    let mut duplicates_dropped = 0;
    for entry in &feed.entries {
        let item = to_item(entry);
        if seen.insert(item.id_hash) {
            items.push(item);
        } else {
            duplicates_dropped += 1;
        }
    }
    Ok(ParsedFeed {
        format,
        items,
        duplicates_dropped,
        ttl_minutes: feed.ttl,
        item_like: item_like_elements(body),
        normalised: false,
        title: feed
            .title
            .as_ref()
            .map(|t| t.content.trim().to_string())
            .filter(|t| !t.is_empty()),
        site_url: feed
            .links
            .iter()
            .find(|l| l.rel.as_deref().is_none_or(|r| r == "alternate"))
            .map(|l| l.href.clone()),
        format_seen: String::new(),
    })
}

fn to_item(entry: &Entry) -> Item {
    let when = entry.published.or(entry.updated);
    let id_hash = if entry.id == NO_LINK_OR_TITLE {
        // Neither id, link nor title: what is left that identifies the item.
        let mut key = String::from("kairos:content\n");
        if let Some(s) = &entry.summary {
            key.push_str(&s.content);
        }
        if let Some(body) = entry.content.as_ref().and_then(|c| c.body.as_ref()) {
            key.push_str(body);
        }
        if let Some(t) = when {
            key.push_str(&t.timestamp_millis().to_string());
        }
        xxh3_64(key.as_bytes())
    } else {
        xxh3_64(entry.id.as_bytes())
    };
    Item {
        id_hash,
        link: entry.links.first().map(|l| l.href.clone()),
        title: entry.title.as_ref().map(|t| t.content.clone()),
        published_unix_ms: when.map(|t| t.timestamp_millis()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSS: &str = r#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><ttl>30</ttl>
<item><guid>a-1</guid><title>One</title><link>http://x.test/1</link><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>
<item><title>Two</title><link>http://x.test/2</link></item>
<item><guid>a-1</guid><title>One again</title></item>
<item><description>no id, link or title</description></item>
</channel></rss>"#;

    /// Documents a reader shows items for that the parser alone reads as empty: counted as
    /// item-like, and read after the normalising rewrite; a format nothing rewrites stays
    /// empty and says how many items it lost.
    #[test]
    fn documents_read_as_empty_still_count_their_items() {
        let atom03 = r#"<?xml version="1.0"?><feed version="0.3" xmlns="http://purl.org/atom/ns#">
<title>t</title><entry><title>a</title><id>tag:a</id></entry><entry><title>b</title><id>tag:b</id></entry></feed>"#;
        let userland = r#"<?xml version="1.0"?><rss version="2.0" xmlns="http://backend.userland.com/rss2"><channel><title>t</title>
<item><title>a</title><link>http://x.test/a</link></item><item><title>b</title><link>http://x.test/b</link></item><item><title>c</title><link>http://x.test/c</link></item></channel></rss>"#;
        let cased = r#"<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/ATOM"><title>t</title>
<entry><title>a</title><id>tag:a</id></entry></feed>"#;
        for (doc, like) in [(atom03, 2), (userland, 3), (cased, 1)] {
            assert_eq!(item_like_elements(doc.as_bytes()), like, "{doc}");
            let first = parse_once(doc.as_bytes()).expect("feed-rs recognises the root");
            assert!(first.items.is_empty(), "{doc}");
            assert_eq!(first.items_unread(), like, "{doc}");
            let p = parse(doc.as_bytes()).unwrap();
            assert!(p.normalised, "{doc}");
            assert_eq!(p.items.len(), like, "{doc}");
            assert_eq!(p.items_unread(), 0, "{doc}");
        }
        let atom03 = parse(atom03.as_bytes()).unwrap();
        assert_eq!(atom03.format, Format::Atom);
        let ids: Vec<u64> = atom03.items.iter().map(|i| i.id_hash).collect();
        assert_ne!(ids[0], ids[1]);
        let unknown = r#"<feed xmlns="http://example.org/not-a-feed-format"><entry><id>a</id></entry></feed>"#;
        let p = parse(unknown.as_bytes()).unwrap();
        assert!(p.items.is_empty() && !p.normalised);
        assert_eq!(p.items_unread(), 1);
    }

    /// Documents the parser refuses whole for their RSS version (0.93, 0.94, none): read as
    /// RSS 2.0 after the rewrite; a refused document the rewrite cannot help keeps the
    /// parser's own error.
    #[test]
    fn rss_versions_the_parser_refuses_are_read_as_2_0() {
        let body = r#"<channel><title>t</title><item><title>a</title><link>http://x.test/a</link><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item><item><title>b</title><link>http://x.test/b</link></item></channel></rss>"#;
        for head in [
            r#"<?xml version="1.0"?><rss version="0.93">"#,
            r#"<rss version='0.94'>"#,
            r#"<rss>"#,
        ] {
            let doc = format!("{head}{body}");
            assert!(
                parse_once(doc.as_bytes()).is_err(),
                "the parser alone refuses {head}"
            );
            let p = parse(doc.as_bytes()).unwrap();
            assert!(p.normalised, "{head}");
            assert_eq!(p.format, Format::Rss2, "{head}");
            assert_eq!(p.items.len(), 2, "{head}");
            assert!(p.items[0].published_unix_ms.is_some(), "{head}: dates kept");
        }
        let broken = r#"<rss version="0.93"><channel><item><title>a</ti"#;
        assert!(matches!(
            parse(broken.as_bytes()),
            Err(ParseError::Malformed(_))
        ));
    }

    #[test]
    fn item_like_counts_elements_not_lookalikes() {
        let rss1 = r#"<rdf:RDF xmlns:rdf="r" xmlns="http://purl.org/rss/1.0/"><channel><items><rdf:Seq><rdf:li resource="a"/></rdf:Seq></items></channel>
<item rdf:about="a"><title>a</title></item><rss:item/><itemref/><entryway>x</entryway><!-- <item> --></rdf:RDF>"#;
        // <items>, <itemref>, <entryway> are not items; the commented one is (a heuristic).
        assert_eq!(item_like_elements(rss1.as_bytes()), 3);
        let quiet = r#"<rss version="2.0"><channel><title>quiet</title><description>&lt;item&gt;</description></channel></rss>"#;
        assert_eq!(item_like_elements(quiet.as_bytes()), 0);
        let p = parse(quiet.as_bytes()).unwrap();
        assert!(
            p.items.is_empty() && p.items_unread() == 0,
            "a quiet feed stays ok"
        );
        let json = r#" {"version":"https://jsonfeed.org/version/1.1","title":"t","items":[
{"id":"1","content_text":"a [b] {c} \" ]"},{"id":"2","tags":"x"},{"id":"3","attachments":[{"url":"u"}]}]}"#;
        assert_eq!(item_like_elements(json.as_bytes()), 3);
        assert_eq!(item_like_elements(br#"{"items": []}"#), 0);
        assert_eq!(item_like_elements(br#"{"title": "no items"}"#), 0);
    }

    #[test]
    fn a_partly_read_document_counts_what_it_lost() {
        let p = parse(RSS.as_bytes()).unwrap();
        // Four <item>s: three read (one a duplicate dropped), the fourth read by content.
        assert_eq!(p.item_like, 4);
        assert_eq!(
            p.items_unread(),
            0,
            "{} items, {} dropped",
            p.items.len(),
            p.duplicates_dropped
        );
        let mut doc = p.clone();
        doc.item_like = 7;
        assert_eq!(doc.items_unread(), 7 - p.items.len() - p.duplicates_dropped);
    }

    #[test]
    fn rss_items_ids_dates_and_duplicates() {
        let f = parse(RSS.as_bytes()).unwrap();
        assert_eq!(f.format, Format::Rss2);
        assert_eq!(f.ttl_minutes, Some(30));
        assert_eq!(f.items.len(), 3);
        assert_eq!(f.duplicates_dropped, 1);
        assert_eq!(f.items[0].id_hash, xxh3_64(b"a-1"));
        assert_eq!(f.items[0].published_unix_ms, Some(1_055_217_600_000));
        assert_eq!(f.items[1].link.as_deref(), Some("http://x.test/2"));
        assert_eq!(f.items[1].published_unix_ms, None);
    }

    #[test]
    fn ids_are_stable_across_parses() {
        // The parser's default would give link-less, id-less items a random id.
        let a = parse(RSS.as_bytes()).unwrap();
        let b = parse(RSS.as_bytes()).unwrap();
        assert_eq!(a.items, b.items);
    }

    #[test]
    fn atom_and_json_feed() {
        let atom = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title>a</title><id>urn:f</id><updated>2024-01-01T00:00:00Z</updated>
<entry><id>urn:e1</id><title>E</title><updated>2024-01-02T03:04:05Z</updated><link href="http://x.test/e1"/></entry></feed>"#;
        let f = parse(atom.as_bytes()).unwrap();
        assert_eq!(f.format, Format::Atom);
        assert_eq!(f.items[0].published_unix_ms, Some(1_704_164_645_000));
        let json = r#"{"version":"https://jsonfeed.org/version/1.1","title":"j","items":[{"id":"1","content_text":"x","date_published":"2024-01-02T03:04:05Z"}]}"#;
        let f = parse(json.as_bytes()).unwrap();
        assert_eq!(f.format, Format::Json);
        assert_eq!(f.items[0].id_hash, xxh3_64(b"1"));
    }

    #[test]
    fn bad_documents_are_errors() {
        assert_eq!(parse(b"").unwrap_err(), ParseError::Empty);
        assert_eq!(parse(b"  \n\t").unwrap_err(), ParseError::Empty);
        assert!(matches!(
            parse(b"<html><body>hi</body></html>"),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"{\"version\": "),
            Err(ParseError::Malformed(_))
        ));
        assert!(matches!(
            parse(&[0xff, 0xfe, 0x00, 0x3c, 0x00]),
            Err(ParseError::Malformed(_))
        ));
    }
}
