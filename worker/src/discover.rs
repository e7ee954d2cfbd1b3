//! Feed discovery: a feed registered by the URL of a web page (a blog's home page, say) is
//! followed to the feed the page announces, as every reader does — the page's
//! `<link rel="alternate" type="application/rss+xml" href="…">` (or Atom, or JSON Feed).
//!
//! The worker does it on the fetch that finds a page where a feed was expected: it reports
//! the announced feed as a permanent move, and the coordinator's move handling updates the
//! registered URL, or merges the feed into one already registered under that URL. So AddFeed,
//! OPML import and `standalone --feeds` all accept page URLs, and the control plane never
//! fetches anything itself.
//!
//! Bounded: only the page's first [`SCAN_BYTES`] are read (the links belong in `<head>`), and
//! at most [`MAX_LINKS`] `<link>` tags are looked at.

use crate::normalise::{find_ignore_case, tag_end};
use url::Url;

/// Bytes of a page scanned for `<link>` tags.
pub const SCAN_BYTES: usize = 512 << 10;
/// `<link>` tags looked at, at most.
pub const MAX_LINKS: usize = 1_000;

/// Feed types a page may announce, in no order: the page's own order is its preference.
const FEED_TYPES: [&str; 5] = [
    "application/rss+xml",
    "application/atom+xml",
    "application/feed+json",
    "application/json",
    "application/rdf+xml",
];

/// The feed `page` (fetched from `base`) announces first, as an absolute http(s) URL.
pub fn announced_feed(page: &[u8], base: &str) -> Option<String> {
    let page = &page[..page.len().min(SCAN_BYTES)];
    let base = Url::parse(base).ok()?;
    let mut links = 0;
    let mut i = 0;
    while let Some(p) = find_ignore_case(&page[i..], b"<link").map(|p| p + i) {
        let end = tag_end(page, p + 5)?;
        i = end;
        if !page
            .get(p + 5)
            .is_some_and(|c| c.is_ascii_whitespace() || *c == b'/')
        {
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        let attrs = attributes(&page[p + 5..end]);
        let get = |name: &str| {
            attrs
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let rel_alternate = get("rel").is_some_and(|rel| {
            rel.split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("alternate"))
        });
        let feed_type = get("type").is_some_and(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            FEED_TYPES.iter().any(|f| f.eq_ignore_ascii_case(t))
        });
        if !(rel_alternate && feed_type) {
            continue;
        }
        let Some(href) = get("href").map(str::trim).filter(|h| !h.is_empty()) else {
            continue;
        };
        let Ok(url) = base.join(&unescape(href)) else {
            continue;
        };
        if matches!(url.scheme(), "http" | "https") {
            return Some(url.to_string());
        }
    }
    None
}

/// Whether a body looks like an HTML page rather than a feed.
pub fn looks_like_html(body: &[u8]) -> bool {
    let head = &body[..body.len().min(4096)];
    find_ignore_case(head, b"<html").is_some()
        || find_ignore_case(head, b"<!doctype html").is_some()
}

/// HTML attributes of a tag's inside: `name="v"`, `name='v'`, `name=v` or a bare `name`.
fn attributes(tag: &[u8]) -> Vec<(String, String)> {
    let s = String::from_utf8_lossy(tag);
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b'/' || b[i] == b'>') {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && !matches!(b[i], b'=' | b'>' | b'/') {
            i += 1;
        }
        if start == i {
            break;
        }
        let name = s[start..i].to_string();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < b.len() && b[i] == b'=' {
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'"' || b[i] == b'\'') {
                let q = b[i];
                let from = i + 1;
                let len = b[from..]
                    .iter()
                    .position(|&c| c == q)
                    .unwrap_or(b.len() - from);
                value = s[from..from + len].to_string();
                i = from + len + 1;
            } else {
                let from = i;
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' {
                    i += 1;
                }
                value = s[from..i].to_string();
            }
        }
        out.push((name, value));
    }
    out
}

/// The character references an `href` commonly carries.
fn unescape(href: &str) -> String {
    href.replace("&amp;", "&")
        .replace("&#38;", "&")
        .replace("&quot;", "\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://blog.example/posts/index.html";

    #[test]
    fn the_first_announced_feed_is_taken_resolved_against_the_page() {
        let page = br#"<!DOCTYPE html><html><head><title>b</title>
<link rel="stylesheet" href="/s.css">
<link rel="alternate" hreflang="de" href="/de/">
<LINK REL="Alternate" TYPE="application/atom+xml" HREF="../feed.atom?a=1&amp;b=2" title="Atom">
<link rel=alternate type=application/rss+xml href=/rss.xml>
</head><body>hi</body></html>"#;
        assert_eq!(
            announced_feed(page, BASE).as_deref(),
            Some("https://blog.example/feed.atom?a=1&b=2")
        );
        let json = br#"<html><head><link href="https://other.example/feed.json" type="application/feed+json" rel="alternate feed"></head></html>"#;
        assert_eq!(
            announced_feed(json, BASE).as_deref(),
            Some("https://other.example/feed.json")
        );
    }

    #[test]
    fn pages_without_a_usable_feed_link_announce_none() {
        for page in [
            &b"<html><head><link rel=\"stylesheet\" href=\"/s.css\"></head></html>"[..],
            b"<html><head><link rel=\"alternate\" type=\"application/rss+xml\"></head></html>",
            b"<html><head><link rel=\"alternate\" type=\"application/rss+xml\" href=\"javascript:alert(1)\"></head></html>",
            b"<html><head><link rel=\"alternate\" type=\"text/html\" href=\"/m/\"></head></html>",
            b"<html><head><linkage rel=\"alternate\" type=\"application/rss+xml\" href=\"/x\"></head></html>",
            b"<html><head><link rel=\"alternate\" type=\"application/rss+xml\" href=\"/x\"",
            b"",
        ] {
            assert_eq!(announced_feed(page, BASE), None, "{}", String::from_utf8_lossy(page));
        }
        assert_eq!(
            announced_feed(
                b"<link rel=alternate type=application/rss+xml href=/x>",
                "not a url"
            ),
            None
        );
    }

    #[test]
    fn a_thousand_links_are_bounded() {
        let mut page = String::from("<html><head>");
        for k in 0..MAX_LINKS {
            page.push_str(&format!(
                "<link rel=\"alternate\" hreflang=\"x{k}\" href=\"/{k}/\">"
            ));
        }
        page.push_str("<link rel=\"alternate\" type=\"application/rss+xml\" href=\"/late.xml\">");
        // Past the cap: not looked at.
        assert_eq!(announced_feed(page.as_bytes(), BASE), None);
        // A thousand feed links: the first wins.
        let many: String = (0..MAX_LINKS)
            .map(|k| {
                format!("<link rel=\"alternate\" type=\"application/rss+xml\" href=\"/{k}.xml\">")
            })
            .collect();
        assert_eq!(
            announced_feed(many.as_bytes(), BASE).as_deref(),
            Some("https://blog.example/0.xml")
        );
    }

    #[test]
    fn html_is_told_from_feeds() {
        assert!(looks_like_html(b"<!DOCTYPE html><html>"));
        assert!(looks_like_html(b"\n<HTML lang=en>"));
        assert!(!looks_like_html(
            b"<?xml version=\"1.0\"?><rss version=\"2.0\"/>"
        ));
    }
}
