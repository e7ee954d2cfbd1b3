//! WebSub discovery (W3C Recommendation, 2018, §4): where a fetched feed says a hub
//! pushes its updates, and the URL to subscribe to (its `self`). The subscriber "MUST check
//! the HTTP Link headers first" and look into the document only when they name no hub; the
//! document's links are read from its header — `<link rel="hub">` / `rel="self"` in Atom
//! (or `atom:link` in an RSS channel) before the first item, and `hubs` / `feed_url` in a
//! JSON Feed. The worker only reports what it found; the coordinator decides whether to
//! subscribe.
//!
//! Everything here is input a stranger wrote: URLs are resolved against the document's own
//! URL, kept only when they are `http`/`https` and at most [`MAX_URL`] bytes, at most
//! [`MAX_HUBS`] hubs are kept, and the document pass stops at the first item or after a
//! bounded number of events.

use quick_xml::events::Event;
use quick_xml::Reader;
use url::Url;

/// Longest hub or self URL kept.
pub const MAX_URL: usize = 2048;
/// Hubs kept at most (a publisher may name several; one is enough to subscribe).
pub const MAX_HUBS: usize = 4;
/// XML events read at most: the links sit in the feed's header.
const MAX_EVENTS: usize = 20_000;
/// `Link` header values looked at at most.
const MAX_HEADER_VALUES: usize = 32;

/// What a response said about push.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushLinks {
    /// Hubs, in the order given, without repeats.
    pub hubs: Vec<String>,
    /// The topic URL the publisher names (`rel="self"`), if any.
    pub topic: Option<String>,
}

impl PushLinks {
    /// No hub named.
    pub fn is_empty(&self) -> bool {
        self.hubs.is_empty()
    }

    fn add_hub(&mut self, href: &str, base: Option<&Url>) {
        if self.hubs.len() >= MAX_HUBS {
            return;
        }
        if let Some(u) = resolve(href, base) {
            if !self.hubs.contains(&u) {
                self.hubs.push(u);
            }
        }
    }

    fn set_topic(&mut self, href: &str, base: Option<&Url>) {
        if self.topic.is_none() {
            self.topic = resolve(href, base);
        }
    }
}

/// The links of a response: its `Link` headers when they name a hub, else its document's.
/// `final_url` is the URL that answered (relative links resolve against it).
pub fn discover<'a>(
    link_headers: impl IntoIterator<Item = &'a str>,
    body: &[u8],
    final_url: &str,
) -> PushLinks {
    let base = Url::parse(final_url).ok();
    let from_headers = from_link_headers(link_headers, base.as_ref());
    if !from_headers.is_empty() {
        return from_headers;
    }
    from_document(body, base.as_ref())
}

/// The hubs and self named by HTTP `Link` header values (RFC 8288: `<uri>; rel="a b"`,
/// several links in one value separated by commas).
pub fn from_link_headers<'a>(
    values: impl IntoIterator<Item = &'a str>,
    base: Option<&Url>,
) -> PushLinks {
    let mut out = PushLinks::default();
    for value in values.into_iter().take(MAX_HEADER_VALUES) {
        for (target, rels) in link_values(value) {
            for rel in rels.split_ascii_whitespace() {
                if rel.eq_ignore_ascii_case("hub") {
                    out.add_hub(target, base);
                } else if rel.eq_ignore_ascii_case("self") {
                    out.set_topic(target, base);
                }
            }
        }
    }
    out
}

/// `(target, rel)` of each link in one `Link` header value. Commas inside `<…>` or quotes
/// do not split links; a link without `rel` is skipped.
fn link_values(value: &str) -> Vec<(&str, String)> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let target = rest[open + 1..open + close].trim();
        rest = &rest[open + close + 1..];
        // Parameters run to the next comma outside quotes.
        let mut end = rest.len();
        let mut quoted = false;
        for (i, c) in rest.char_indices() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let params = &rest[..end];
        rest = &rest[end..];
        for p in params.split(';') {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            if k.trim().eq_ignore_ascii_case("rel") {
                out.push((target, v.trim().trim_matches('"').to_string()));
                break;
            }
        }
    }
    out
}

/// The hubs and self a feed document names in its header.
pub fn from_document(body: &[u8], base: Option<&Url>) -> PushLinks {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &body[i..])
        .unwrap_or_default();
    let start = start.strip_prefix(&[0xef, 0xbb, 0xbf]).unwrap_or(start);
    match start.first() {
        Some(b'{') => from_json(start, base),
        Some(b'<') => from_xml(start, base),
        _ => PushLinks::default(),
    }
}

fn from_xml(body: &[u8], base: Option<&Url>) -> PushLinks {
    let mut out = PushLinks::default();
    let mut reader = Reader::from_reader(body);
    reader.config_mut().check_end_names = false;
    let mut buf = Vec::new();
    for _ in 0..MAX_EVENTS {
        buf.clear();
        let e = match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => e,
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => continue,
        };
        let name = e.local_name().as_ref().to_ascii_lowercase();
        match name.as_slice() {
            // The links that matter are the feed's, before its items.
            b"item" | b"entry" => break,
            b"link" => {
                let (mut rel, mut href): (Option<String>, Option<String>) = (None, None);
                for a in e.attributes().flatten() {
                    let Ok(v) = a.decoded_and_normalized_value(
                        quick_xml::XmlVersion::default(),
                        reader.decoder(),
                    ) else {
                        continue;
                    };
                    match a.key.local_name().as_ref() {
                        b"rel" => rel = Some(v.into_owned()),
                        b"href" => href = Some(v.into_owned()),
                        _ => {}
                    }
                }
                let (Some(rel), Some(href)) = (rel, href) else {
                    continue;
                };
                for r in rel.split_ascii_whitespace() {
                    if r.eq_ignore_ascii_case("hub") {
                        out.add_hub(&href, base);
                    } else if r.eq_ignore_ascii_case("self") {
                        out.set_topic(&href, base);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// JSON Feed 1.x: `"hubs": [{"type": "WebSub", "url": …}]` and `"feed_url"`.
fn from_json(body: &[u8], base: Option<&Url>) -> PushLinks {
    let mut out = PushLinks::default();
    let Ok(serde_json::Value::Object(head)) = serde_json::from_slice(body) else {
        return out;
    };
    for h in head
        .get("hubs")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        // The type names the protocol; older feeds wrote "PubSubHubbub".
        let kind = h.get("type").and_then(|v| v.as_str()).unwrap_or("");
        let kind = kind.to_ascii_lowercase();
        if let (true, Some(url)) = (
            kind.is_empty() || kind == "websub" || kind == "pubsubhubbub",
            h.get("url").and_then(|v| v.as_str()),
        ) {
            out.add_hub(url, base);
        }
    }
    if !out.hubs.is_empty() {
        if let Some(f) = head.get("feed_url").and_then(|v| v.as_str()) {
            out.set_topic(f, base);
        }
    }
    out
}

/// `href` as an absolute `http`/`https` URL of at most [`MAX_URL`] bytes.
fn resolve(href: &str, base: Option<&Url>) -> Option<String> {
    let href = href.trim();
    if href.is_empty() || href.len() > MAX_URL {
        return None;
    }
    let url = match base {
        Some(b) => b.join(href).ok()?,
        None => Url::parse(href).ok()?,
    };
    (matches!(url.scheme(), "http" | "https") && url.as_str().len() <= MAX_URL)
        .then(|| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "https://example.com/feeds/main.xml";

    #[test]
    fn link_headers_win_over_the_document() {
        let headers = [
            r#"<https://hub.example/>; rel="hub", </feeds/main.xml>; rel="self""#,
            r#"<https://hub2.example/push>; rel=hub"#,
        ];
        let doc = br#"<feed xmlns="http://www.w3.org/2005/Atom"><link rel="hub" href="https://other.example/"/></feed>"#;
        assert_eq!(
            discover(headers, doc, PAGE),
            PushLinks {
                hubs: vec![
                    "https://hub.example/".into(),
                    "https://hub2.example/push".into()
                ],
                topic: Some("https://example.com/feeds/main.xml".into()),
            }
        );
    }

    #[test]
    fn a_header_without_a_hub_leaves_it_to_the_document() {
        let headers = [r#"<https://example.com/feeds/main.xml>; rel="self""#];
        let rss = br#"<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>t</title>
<atom:link rel="self" href="https://example.com/rss" type="application/rss+xml"/>
<atom:link rel="hub" href="https://pubsubhubbub.appspot.com/"/>
<item><title>a</title><atom:link rel="hub" href="https://item-level.example/"/></item>
</channel></rss>"#;
        assert_eq!(
            discover(headers, rss, PAGE),
            PushLinks {
                hubs: vec!["https://pubsubhubbub.appspot.com/".into()],
                topic: Some("https://example.com/rss".into()),
            }
        );
    }

    #[test]
    fn atom_rels_with_several_values_and_relative_hrefs() {
        let atom = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<link rel="self hub" href="/push"/><link rel="alternate" href="/"/>
<entry><link rel="hub" href="https://late.example/"/></entry></feed>"#;
        let got = discover([], atom, PAGE);
        assert_eq!(got.hubs, vec!["https://example.com/push".to_string()]);
        assert_eq!(got.topic.as_deref(), Some("https://example.com/push"));
    }

    #[test]
    fn json_feed_hubs() {
        let json = br#"{"version":"https://jsonfeed.org/version/1.1","title":"t",
"feed_url":"https://example.com/feed.json",
"hubs":[{"type":"rssCloud","url":"https://cloud.example/"},{"type":"WebSub","url":"https://hub.example/"}],
"items":[]}"#;
        assert_eq!(
            discover([], json, PAGE),
            PushLinks {
                hubs: vec!["https://hub.example/".into()],
                topic: Some("https://example.com/feed.json".into()),
            }
        );
    }

    #[test]
    fn hostile_links_are_dropped_and_bounded() {
        let long = format!("https://hub.example/{}", "a".repeat(MAX_URL));
        let mut headers = vec![
            "<javascript:alert(1)>; rel=hub".to_string(),
            "<ftp://hub.example/>; rel=hub".to_string(),
            format!("<{long}>; rel=hub"),
            "<https://a.example/>; rel=\"hub\"; title=\"x, y\", <https://b.example/>; rel=\"hub\""
                .to_string(),
            "garbage without brackets; rel=hub".to_string(),
            "<https://unclosed.example/; rel=hub".to_string(),
        ];
        for i in 0..10 {
            headers.push(format!("<https://h{i}.example/>; rel=hub"));
        }
        let got = from_link_headers(headers.iter().map(String::as_str), None);
        assert_eq!(
            got.hubs[..2],
            [
                "https://a.example/".to_string(),
                "https://b.example/".to_string()
            ]
        );
        assert_eq!(got.hubs.len(), MAX_HUBS);
        // 4,000 levels of nesting, as JSON and as XML, and a 3 MB href: nothing, no panic.
        let deep_json = format!("{}{}", "[".repeat(4000), "]".repeat(4000));
        let deep_xml = format!("{}{}", "<a>".repeat(4000), "</a>".repeat(4000));
        let huge = format!(
            "<feed><link rel=\"hub\" href=\"https://h.example/{}\"/></feed>",
            "x".repeat(3 << 20)
        );
        for doc in [deep_json.as_bytes(), deep_xml.as_bytes(), huge.as_bytes()] {
            assert_eq!(discover([], doc, PAGE), PushLinks::default());
        }
        for doc in [
            &b""[..],
            b"not a feed",
            b"<<<>>>",
            b"{\"hubs\": 7}",
            b"<feed><link rel=\"hub\"/></feed>",
        ] {
            assert_eq!(discover([], doc, PAGE), PushLinks::default());
        }
    }
}
