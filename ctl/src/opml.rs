//! OPML import (the document goes to the coordinator, which parses and bounds it) and
//! export (written here from the registry: every feed, or one user's subscriptions).

use crate::commands::{all_feeds, Opml};
use crate::output::{print, Format};
use crate::{Admin, Failure};
use kairos_proto::v1 as pb;
use quick_xml::escape::escape;
use serde_json::json;
use std::io::Read;

/// Largest OPML file sent (the coordinator bounds it too).
const MAX_OPML_BYTES: u64 = 32 << 20;

pub async fn run(admin: &mut Admin, out: Format, c: Opml) -> Result<(), Failure> {
    match c {
        Opml::Import { file, user } => {
            let opml = read_opml(&file)?;
            let r = admin
                .import_opml(pb::ImportOpmlRequest {
                    opml,
                    user_id: user.unwrap_or_default(),
                })
                .await
                .map_err(|s| Failure::from_status("importing the OPML", s))?
                .into_inner();
            print(
                out,
                json!({
                    "feeds_added": r.feeds_added,
                    "feeds_already_present": r.feeds_already_present,
                    "subscriptions_added": r.subscriptions_added,
                    "skipped": r.skipped,
                }),
                || {
                    let mut s = format!(
                        "{} feeds added, {} already present, {} subscriptions added, {} outlines skipped\n",
                        r.feeds_added,
                        r.feeds_already_present,
                        r.subscriptions_added,
                        r.skipped.len()
                    );
                    for k in &r.skipped {
                        s.push_str(&format!("  skipped: {k}\n"));
                    }
                    s
                },
            );
        }
        Opml::Export { user } => {
            let mut feeds = all_feeds(admin).await?;
            if let Some(u) = &user {
                let subs = admin
                    .list_subscriptions(pb::ListSubscriptionsRequest {
                        scope: Some(pb::list_subscriptions_request::Scope::UserId(u.clone())),
                    })
                    .await
                    .map_err(|s| Failure::from_status("the user's subscriptions", s))?
                    .into_inner()
                    .subscriptions;
                let read: std::collections::HashSet<String> =
                    subs.into_iter().map(|s| s.feed_id).collect();
                feeds.retain(|f| read.contains(&f.feed_id));
            }
            // The document is the output in either format: JSON callers get it as a string.
            let doc = document(&feeds, user.as_deref());
            print(out, json!({"opml": doc}), || doc.clone());
        }
    }
    Ok(())
}

fn read_opml(file: &std::path::Path) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    let read = if file.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_OPML_BYTES + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(file).and_then(|f| f.take(MAX_OPML_BYTES + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| Failure::Local(format!("reading {}: {e}", file.display())))?;
    if bytes.len() as u64 > MAX_OPML_BYTES {
        return Err(Failure::Local(format!(
            "{} is larger than {} MiB",
            file.display(),
            MAX_OPML_BYTES >> 20
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::Local(format!("{} is not UTF-8 text", file.display())))
}

/// An OPML 2.0 document listing `feeds`.
pub fn document(feeds: &[pb::Feed], user: Option<&str>) -> String {
    let title = match user {
        Some(u) => format!("Kairos subscriptions of {u}"),
        None => "Kairos feeds".to_string(),
    };
    let created = chrono::Utc::now().to_rfc2822();
    let mut s =
        String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<opml version=\"2.0\">\n");
    s.push_str(&format!(
        "  <head>\n    <title>{}</title>\n    <dateCreated>{created}</dateCreated>\n  </head>\n  <body>\n",
        escape(title.as_str())
    ));
    for f in feeds {
        // The feed's own title when a document was read (readers show `text`), else its id;
        // import reads only `xmlUrl`, so either round-trips.
        let name = if f.title.is_empty() {
            &f.feed_id
        } else {
            &f.title
        };
        let name = escape(name.as_str());
        let site = if f.site_url.is_empty() {
            String::new()
        } else {
            format!(" htmlUrl=\"{}\"", escape(f.site_url.as_str()))
        };
        s.push_str(&format!(
            "    <outline type=\"rss\" text=\"{name}\" title=\"{name}\" xmlUrl=\"{}\"{site}/>\n",
            escape(f.url.as_str())
        ));
    }
    s.push_str("  </body>\n</opml>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_escapes_attributes_and_parses_back() {
        let feeds = vec![pb::Feed {
            feed_id: "a&b \"quoted\" <x>".into(),
            url: "https://example.org/feed?a=1&b=2".into(),
            ..Default::default()
        }];
        let doc = document(&feeds, Some("u<1>"));
        assert!(
            doc.contains("xmlUrl=\"https://example.org/feed?a=1&amp;b=2\""),
            "{doc}"
        );
        assert!(
            doc.contains("text=\"a&amp;b &quot;quoted&quot; &lt;x&gt;\""),
            "{doc}"
        );
        // Well-formed: a reader gets the URL back unescaped.
        let mut r = quick_xml::Reader::from_str(&doc);
        let mut urls = Vec::new();
        loop {
            match r.read_event().expect("well-formed") {
                quick_xml::events::Event::Empty(e) if e.name().as_ref() == b"outline" => {
                    for a in e.attributes() {
                        let a = a.unwrap();
                        if a.key.as_ref() == b"xmlUrl" {
                            let raw = std::str::from_utf8(&a.value).unwrap();
                            urls.push(quick_xml::escape::unescape(raw).unwrap().into_owned());
                        }
                    }
                }
                quick_xml::events::Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(urls, vec!["https://example.org/feed?a=1&b=2".to_string()]);
    }
}
