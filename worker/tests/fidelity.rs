//! Feed fidelity, one fixture per class of document seen in the wild that a strict reading
//! loses: each must yield the items a reader shows, with stable ids, and a bad attribute or
//! a stray character must cost that attribute or character, not the document.

use kairos_worker::parse::{parse, Format, Item};
use std::io::Write;

/// Titles of the items read from `doc`, which must parse.
fn titles(doc: &[u8]) -> Vec<String> {
    let f = parse(doc).unwrap_or_else(|e| panic!("{e:?}: {}", String::from_utf8_lossy(doc)));
    f.items
        .iter()
        .map(|i| i.title.clone().unwrap_or_default())
        .collect()
}

fn items(doc: &[u8]) -> Vec<Item> {
    parse(doc).expect("parses").items
}

#[test]
fn a_text_construct_with_an_unexpected_type_costs_the_attribute_not_the_document() {
    // Atom 1.0: MIME types where the spec wants text/html/xhtml; one good entry beside them.
    let atom = br#"<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title type="text/plain">f</title><id>urn:f</id>
<entry><id>urn:1</id><title type="text/plain">One</title><summary type="image/jpeg">x</summary></entry>
<entry><id>urn:2</id><title type="application/xhtml+xml"><div xmlns="http://www.w3.org/1999/xhtml">Two</div></title>
<content type="application/xhtml+xml"><div xmlns="http://www.w3.org/1999/xhtml">body</div></content></entry>
<entry><id>urn:3</id><title type="">Three</title></entry>
<entry><id>urn:4</id><title>Four</title></entry></feed>"#;
    let got = titles(atom);
    assert_eq!(got.len(), 4, "{got:?}");
    // An XHTML title is kept as its markup, as the parser keeps any `type="xhtml"` title.
    assert!(got[0] == "One" && got[1].contains(">Two<") && got[2] == "Three" && got[3] == "Four");
    assert!(parse(atom).unwrap().normalised);
    // RSS 2.0 with Media RSS: media:title type="text/html" (Media RSS says plain or html).
    let rss = br#"<rss version="2.0" xmlns:media="http://search.yahoo.com/mrss/"><channel><title>f</title>
<item><guid>g1</guid><title>One</title><media:title type="text/html">m</media:title></item>
<item><guid>g2</guid><title>Two</title></item></channel></rss>"#;
    assert_eq!(titles(rss), ["One", "Two"]);
    // The ids are the documents' own, as they would be without the repair.
    let ids: Vec<u64> = items(atom).iter().map(|i| i.id_hash).collect();
    assert_eq!(ids[3], xxhash_rust::xxh3::xxh3_64(b"urn:4"));
}

#[test]
fn atom_0_3_entries_with_mime_types_are_read() {
    let doc = br#"<feed version="0.3" xmlns="http://purl.org/atom/ns#"><title type="text/plain" mode="escaped">f</title>
<entry><title type="text/plain">One</title><id>tag:1</id><issued>2004-04-20T00:23:47Z</issued></entry>
<entry><content type="application/xhtml+xml" mode="xml"><div xmlns="http://www.w3.org/1999/xhtml">only content</div></content></entry></feed>"#;
    let f = parse(doc).unwrap();
    assert_eq!(f.items.len(), 2);
    assert_eq!(f.items[0].published_unix_ms, Some(1_082_420_627_000));
    assert!(f.normalised && f.items_unread() == 0);
}

#[test]
fn rss_without_a_channel_is_read() {
    let doc = br#"<rss version="2.0"><item><title>One</title><link>http://x.test/1</link></item>
<item><title>Two</title><link>http://x.test/2</link></item></rss>"#;
    assert_eq!(titles(doc), ["One", "Two"]);
    let unversioned = br#"<rss><item><description>d</description><title>Only</title></item></rss>"#;
    assert_eq!(titles(unversioned), ["Only"]);
}

#[test]
fn rss_1_0_items_without_a_link_are_identified_by_rdf_about() {
    let doc = br#"<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
<channel rdf:about="http://x.test/"><title>f</title><link>http://x.test/</link></channel>
<item rdf:about="http://x.test/1"><title>One</title><link>http://x.test/1</link></item>
<item rdf:about="http://x.test/2?a=1&amp;b=2"><title>Two</title></item>
<item rdf:about="http://x.test/3"></item></rdf:RDF>"#;
    let got = items(doc);
    assert_eq!(got.len(), 3, "a partly read document is read again");
    assert_eq!(got[1].link.as_deref(), Some("http://x.test/2?a=1&b=2"));
    assert_eq!(got[2].link.as_deref(), Some("http://x.test/3"));
    // The item that had a link keeps the id it had before the repair.
    let before = br#"<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
<channel rdf:about="http://x.test/"><title>f</title><link>http://x.test/</link></channel>
<item rdf:about="http://x.test/1"><title>One</title><link>http://x.test/1</link></item></rdf:RDF>"#;
    assert_eq!(items(before)[0].id_hash, got[0].id_hash);
}

#[test]
fn rdf_without_the_rss_namespace_is_read_as_rss_1_0() {
    let doc =
        br#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<channel rdf:about="http://x.test/"><title>f</title><link>http://x.test/</link></channel>
<item rdf:about="http://x.test/1"><title>One</title><link>http://x.test/1</link></item>
<item rdf:about="http://x.test/2"><title>Two</title></item></rdf:RDF>"#;
    let f = parse(doc).unwrap();
    assert_eq!(f.format, Format::Rss1);
    assert_eq!(f.items.len(), 2);
}

#[test]
fn rss_1_1_is_read() {
    let doc = br#"<?xml version="1.0"?>
<Channel xmlns="http://purl.org/net/rss1.1#" xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" rdf:about="http://x.test/">
<title>f</title><link>http://x.test/</link><description>d</description>
<items rdf:parseType="Collection">
<item rdf:about="http://x.test/1"><title>One</title><link>http://x.test/1</link></item>
<item rdf:about="http://x.test/2"><title>Two</title><link>http://x.test/2</link></item>
</items></Channel>"#;
    let f = parse(doc).unwrap();
    assert_eq!(f.items.len(), 2);
    assert_eq!(f.items[1].link.as_deref(), Some("http://x.test/2"));
}

#[test]
fn a_stray_ampersand_costs_nothing() {
    let doc = br#"<rss version="2.0"><channel><title>Tom & Jerry</title>
<item><title>Fish & chips</title><link>http://x.test/1?a=1&b=2</link></item>
<item><title>Ok &amp; fine &#38; &#x26;</title><link>http://x.test/2</link></item>
<item><title><![CDATA[R&D]]></title><link>http://x.test/3</link></item></channel></rss>"#;
    assert_eq!(titles(doc), ["Fish & chips", "Ok & fine & &", "R&D"]);
    assert_eq!(
        items(doc)[0].link.as_deref(),
        Some("http://x.test/1?a=1&b=2")
    );
}

#[test]
fn userland_rss_2_0_under_a_prefix_is_read() {
    let doc = br#"<r:rss version="2.0" xmlns:r="http://backend.userland.com/rss2" xmlns:dc="http://purl.org/dc/elements/1.1/">
<r:channel><r:title>f</r:title><r:item><r:title>One</r:title><r:link>http://x.test/1</r:link><dc:date>2002-09-28T21:00:02Z</dc:date></r:item></r:channel></r:rss>"#;
    let f = parse(doc).unwrap();
    assert_eq!(f.format, Format::Rss2);
    assert_eq!(f.items.len(), 1);
}

#[test]
fn json_feeds_as_written_in_the_wild_are_read() {
    let doc = br#"{"version":"http://jsonfeed.org/version/1","title":"j","items":[
{"id":1,"title":"One","url":"http://x.test/1","tags":"news","content_text":"x"},
{"id":"2","title":"Two","tags":["a","b"],"content_text":"y"},
{"id":"3","title":"Three","tags":null,"content_html":"<p>z</p>"}]}"#;
    let f = parse(doc).unwrap();
    assert_eq!(f.format, Format::Json);
    assert_eq!(f.items.len(), 3);
    assert_eq!(f.items[0].id_hash, xxhash_rust::xxh3::xxh3_64(b"1"));
}

#[test]
fn utf16_without_a_bom_and_undeclared_gzip_are_read() {
    let doc = r#"<?xml version="1.0" encoding="UTF-16"?><rss version="2.0"><channel><title>f</title>
<item><guid>g1</guid><title>Приве́т</title></item></channel></rss>"#;
    for le in [true, false] {
        let bytes: Vec<u8> = doc
            .encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect();
        assert_eq!(titles(&bytes), ["Приве́т"]);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(doc.replace("UTF-16", "UTF-8").as_bytes())
        .unwrap();
    assert_eq!(titles(&gz.finish().unwrap()), ["Приве́т"]);
}

#[test]
fn documents_that_parse_are_not_rewritten() {
    // A valid feed with things the repairs look for (an `&amp;`, a `type`): read as is.
    let doc = br#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="html">A &amp;amp; B</title><id>urn:f</id>
<entry><id>urn:1</id><title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">One</div></title></entry></feed>"#;
    let f = parse(doc).unwrap();
    assert!(!f.normalised);
    assert_eq!(f.items.len(), 1);
}

/// A document, and the format, title and site it should say it has.
type Described<'a> = (&'a [u8], &'a str, Option<&'a str>, Option<&'a str>);

#[test]
fn the_document_says_what_it_is() {
    let cases: [Described; 6] = [
        (
            br#"<rss version="2.0"><channel><title> Blog </title><link>https://b.test/</link><item><guid>1</guid></item></channel></rss>"#,
            "rss-2.0",
            Some("Blog"),
            Some("https://b.test/"),
        ),
        (
            br#"<rss version="0.91"><channel><title>Old</title><item><title>a</title><link>http://x.test/a</link></item></channel></rss>"#,
            "rss-0.91",
            Some("Old"),
            None,
        ),
        (
            br#"<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><link rel="self" href="https://a.test/feed"/><link href="https://a.test/"/><id>urn:a</id><entry><id>1</id></entry></feed>"#,
            "atom-1.0",
            Some("A"),
            Some("https://a.test/"),
        ),
        (
            br#"<feed version="0.3" xmlns="http://purl.org/atom/ns#"><title>Z</title><entry><id>tag:1</id><title>t</title></entry></feed>"#,
            "atom-0.3",
            Some("Z"),
            None,
        ),
        (
            br#"{"version":"https://jsonfeed.org/version/1.1","title":"J","home_page_url":"https://j.test/","items":[{"id":"1","content_text":"x"}]}"#,
            "json-feed-1.1",
            Some("J"),
            Some("https://j.test/"),
        ),
        (
            br#"<rss><item><title>no channel</title></item></rss>"#,
            "rss",
            None,
            None,
        ),
    ];
    for (doc, format, title, site) in cases {
        let f = parse(doc).unwrap();
        assert_eq!(f.format_seen, format, "{}", String::from_utf8_lossy(doc));
        assert_eq!(f.title.as_deref(), title, "{format}");
        assert_eq!(f.site_url.as_deref(), site, "{format}");
    }
}

#[test]
fn classes_other_readers_keep_are_read_whole() {
    let atom = |entries: &str| {
        format!(
            r#"<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>f</title><id>urn:f</id><updated>2024-01-01T00:00:00Z</updated>{entries}</feed>"#
        )
    };
    let entry = |n: u32, content: &str| {
        format!("<entry><id>urn:{n}</id><title>E{n}</title><updated>2024-01-01T00:00:00Z</updated>{content}</entry>")
    };
    let cases: Vec<(&str, String)> = vec![
        // Atom content with a `src` and a body too (RFC 4287 wants it empty).
        (
            "content with src and a body",
            atom(&(entry(1, r#"<content src="http://example.org/1">some text</content>"#)
                + &entry(
                    2,
                    r#"<content type="xhtml" src="http://example.org/2"><div xmlns="http://www.w3.org/1999/xhtml">x</div></content>"#,
                ))),
        ),
        // A `type` that is no MIME type, and XML types the parser refuses inline.
        (
            "content types",
            atom(&(entry(1, r#"<content type="xml"><a>b</a></content>"#)
                + &entry(2, r#"<content type="markdown">*x*</content>"#)
                + &entry(3, r#"<content type="text/xml"><a>b</a></content>"#))),
        ),
        // An Atom draft between 0.3 and 1.0, named in its namespace.
        (
            "atom draft namespace",
            atom(&(entry(1, "") + &entry(2, ""))).replace(
                "http://www.w3.org/2005/Atom",
                "http://purl.org/atom/ns#draft-ietf-atompub-format-08",
            ),
        ),
        // RSS 1.0 with its items written inside the channel.
        (
            "rss 1.0 items inside the channel",
            r#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/">
<channel rdf:about="http://example.org/"><title>f</title><link>http://example.org/</link><description>d</description>
<item rdf:about="http://example.org/1"><title>E1</title><link>http://example.org/1</link></item>
<item rdf:about="http://example.org/2"><title>E2</title><link>http://example.org/2</link></item></channel></rdf:RDF>"#
                .to_string(),
        ),
    ];
    for (what, doc) in cases {
        let got = titles(doc.as_bytes());
        let want: Vec<String> = (1..=got.len().max(2)).map(|n| format!("E{n}")).collect();
        assert!(got.len() >= 2 && got == want, "{what}: {got:?}");
    }
    // Content given by `src` keeps its type (it describes the remote resource).
    let by_src = atom(&entry(
        1,
        r#"<content type="application/xml" src="http://example.org/1.xml"/>"#,
    ));
    assert_eq!(titles(by_src.as_bytes()), ["E1"]);
}
