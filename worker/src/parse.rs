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

/// Marker the id generator returns when an item has neither a link nor a title.
const NO_LINK_OR_TITLE: &str = "kairos:no-link-or-title";

/// Parses a feed document.
pub fn parse(body: &[u8]) -> Result<ParsedFeed, ParseError> {
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
