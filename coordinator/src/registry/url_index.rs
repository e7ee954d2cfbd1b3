//! The URL index (`furl/<hash>` → feed id): one normalized URL belongs to one feed, so a
//! feed added by hand under its own id, imported again from OPML, or moved onto by a
//! redirect is fetched once. Adds, URL changes and removals keep it in the same atomic
//! write as the feed's record; stores written before it existed are indexed when a hub
//! opens them.

use super::{check_url, decode, FeedRecord, Registry, RegistryError};
use crate::store::keys::{BadId, Key};
use crate::store::{KvBackend, Op};
use futures_util::stream::{self, StreamExt};
use xxhash_rust::xxh3::xxh3_64;

/// Chunks of the URL index read at once when a hub opens.
const READS_IN_FLIGHT: usize = 8;

/// What [`Registry::index_urls`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UrlIndexReport {
    /// Feeds entered in the index now.
    pub indexed: usize,
    /// Feeds whose URL an earlier feed has: (this feed, the earlier one).
    pub duplicates: Vec<(String, String)>,
}

/// The URL index's key for a normalized URL.
pub(super) fn url_key(url: &str) -> Result<Vec<u8>, BadId> {
    Key::FeedUrl(xxh3_64(url.as_bytes())).encode()
}

impl<B: KvBackend> Registry<B> {
    /// The feed registered under `url` (normalized first), if any.
    pub async fn feed_by_url(&self, url: &str) -> Result<Option<FeedRecord>, RegistryError> {
        let (url, _) = check_url(url)?;
        Ok(self.index_entry(&url).await?.1)
    }

    /// The index entry of a normalized URL as stored (the compare value for a
    /// transaction that writes it), and the feed it names if that feed has this URL. An
    /// entry naming a feed that no longer has the URL is stale (a hash collision, or one a
    /// crash between versions left) and may be taken over.
    pub(super) async fn index_entry(
        &self,
        url: &str,
    ) -> Result<(Option<Vec<u8>>, Option<FeedRecord>), RegistryError> {
        let Some(raw) = self.store.get(url_key(url)?).await? else {
            return Ok((None, None));
        };
        let owner = String::from_utf8_lossy(&raw).into_owned();
        let rec = match self.store.get(Key::Feed(&owner).encode()?).await? {
            Some(b) => Some(decode::<FeedRecord>(&b)?).filter(|f| f.url == url),
            None => None,
        };
        Ok((Some(raw), rec))
    }

    /// Enters every feed of `feeds` (the whole registry) in the URL index, for stores
    /// written before it existed, and reports feeds that share a URL with an earlier one:
    /// those were registered twice and are fetched twice until an operator removes one.
    pub async fn index_urls(&self, feeds: &[FeedRecord]) -> Result<UrlIndexReport, RegistryError> {
        let mut report = UrlIndexReport::default();
        let url_of: std::collections::HashMap<&str, &str> = feeds
            .iter()
            .map(|f| (f.id.as_str(), f.url.as_str()))
            .collect();
        let mut first: std::collections::HashMap<&str, &str> = Default::default();
        // Several chunks' reads in flight, taken in order: one after another they were the
        // largest part of a new leader's start at a million feeds (14 s of 37 on one etcd).
        let mut chunks = stream::iter(feeds.chunks(1000))
            .map(|chunk| async move {
                let keys = chunk
                    .iter()
                    .map(|f| url_key(&f.url))
                    .collect::<Result<Vec<_>, _>>()?;
                let found = self.store.get_many(keys.clone()).await?;
                Ok::<_, RegistryError>((chunk, keys, found))
            })
            .buffered(READS_IN_FLIGHT);
        while let Some(read) = chunks.next().await {
            let (chunk, keys, found) = read?;
            let mut ops = Vec::new();
            for ((f, key), owner) in chunk.iter().zip(keys).zip(found) {
                match first.entry(f.url.as_str()) {
                    std::collections::hash_map::Entry::Occupied(e) => {
                        report.duplicates.push((f.id.clone(), e.get().to_string()));
                        continue;
                    }
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(f.id.as_str());
                    }
                }
                let owner = owner.map(|o| String::from_utf8_lossy(&o).into_owned());
                // Kept when it names a feed that has this URL (this one or a duplicate).
                let valid = owner
                    .as_deref()
                    .is_some_and(|o| url_of.get(o) == Some(&f.url.as_str()));
                if !valid {
                    ops.push(Op::Put(key, f.id.clone().into_bytes()));
                    report.indexed += 1;
                }
            }
            if !ops.is_empty() {
                self.store.batch(ops).await?;
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;
    use std::sync::Arc;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    fn opml(urls: &[&str]) -> String {
        let outlines: String = urls
            .iter()
            .map(|u| format!(r#"<outline xmlUrl="{u}"/>"#))
            .collect();
        format!(r#"<opml version="2.0"><body>{outlines}</body></opml>"#)
    }

    #[test]
    fn one_url_is_one_feed_however_it_is_added() {
        rt().block_on(async {
            let r = Registry::new(Arc::new(MemoryBackend::new()));
            r.add_feed(Some("news"), "https://Example.org/rss", 1.0)
                .await
                .unwrap();
            // The same URL (as normalized) under another id, or under its hash id.
            for id in [Some("news-again"), None] {
                let e = r
                    .add_feed(id, "https://example.org/rss", 1.0)
                    .await
                    .unwrap_err();
                assert!(
                    matches!(&e, RegistryError::AlreadyExists(m) if m.contains("`news`")),
                    "{e}"
                );
            }
            // An OPML import of it subscribes the reader to `news`; a new URL is added.
            r.add_user("ann", 1.0).await.unwrap();
            let got = r
                .import_opml(
                    &opml(&["https://example.org/rss", "https://other.test/feed"]),
                    Some("ann"),
                )
                .await
                .unwrap();
            assert_eq!((got.feeds_added, got.feeds_already_present), (1, 1));
            assert_eq!(got.subscriptions_added, 2);
            let subs = r.subscriptions("ann").await.unwrap();
            assert!(subs.contains(&"news".to_string()), "{subs:?}");
            assert_eq!(r.all_feeds().await.unwrap().len(), 2);
            // The imported feed is indexed too.
            let e = r
                .add_feed(Some("x"), "https://other.test/feed", 1.0)
                .await
                .unwrap_err();
            assert!(matches!(e, RegistryError::AlreadyExists(_)), "{e}");
            assert_eq!(
                r.feed_by_url("https://OTHER.test/feed")
                    .await
                    .unwrap()
                    .map(|f| f.id),
                Some(got.added_ids[0].clone())
            );
        });
    }

    #[test]
    fn moves_and_removals_carry_the_index_along() {
        rt().block_on(async {
            let r = Registry::new(Arc::new(MemoryBackend::new()));
            r.add_feed(Some("a"), "https://a.test/old", 1.0)
                .await
                .unwrap();
            r.add_feed(Some("b"), "https://b.test/feed", 1.0)
                .await
                .unwrap();
            // Onto another feed's URL: refused, naming it; nothing changes.
            let e = r
                .set_feed_url("a", "https://b.test/feed")
                .await
                .unwrap_err();
            assert!(
                matches!(&e, RegistryError::AlreadyExists(m) if m.contains("`b`")),
                "{e}"
            );
            assert_eq!(r.get_feed("a").await.unwrap().url, "https://a.test/old");
            // A real move frees the old URL and takes the new one.
            r.set_feed_url("a", "https://a.test/new").await.unwrap();
            assert_eq!(r.feed_by_url("https://a.test/old").await.unwrap(), None);
            assert_eq!(
                r.feed_by_url("https://a.test/new")
                    .await
                    .unwrap()
                    .map(|f| f.id),
                Some("a".to_string())
            );
            r.add_feed(Some("c"), "https://a.test/old", 1.0)
                .await
                .unwrap();
            // A removal frees its URL.
            r.remove_feed("b").await.unwrap();
            r.add_feed(Some("d"), "https://b.test/feed", 1.0)
                .await
                .unwrap();
            assert_eq!(r.all_feeds().await.unwrap().len(), 3);
        });
    }

    #[test]
    fn a_store_from_before_the_index_is_indexed_and_its_duplicates_reported() {
        rt().block_on(async {
            let store = Arc::new(MemoryBackend::new());
            // Records as an older version wrote them: no index, one URL registered twice.
            let rec = |id: &str, url: &str| FeedRecord {
                id: id.into(),
                url: url.into(),
                host: "h.test".into(),
                weight: 1.0,
            };
            let feeds = vec![
                rec("a", "https://h.test/one"),
                rec("b", "https://h.test/two"),
                rec("c", "https://h.test/one"),
            ];
            let ops = feeds
                .iter()
                .map(|f| {
                    Op::Put(
                        Key::Feed(&f.id).encode().unwrap(),
                        serde_json::to_vec(f).unwrap(),
                    )
                })
                .collect();
            store.batch(ops).await.unwrap();
            let r = Registry::new(store);
            let report = r.index_urls(&feeds).await.unwrap();
            assert_eq!(report.indexed, 2);
            assert_eq!(report.duplicates, vec![("c".to_string(), "a".to_string())]);
            // Indexed: the next add of that URL is refused, and a second pass writes nothing.
            let e = r
                .add_feed(Some("z"), "https://h.test/two", 1.0)
                .await
                .unwrap_err();
            assert!(
                matches!(&e, RegistryError::AlreadyExists(m) if m.contains("`b`")),
                "{e}"
            );
            let again = r.index_urls(&feeds).await.unwrap();
            assert_eq!(again.indexed, 0);
            assert_eq!(again.duplicates.len(), 1);
            // Removing the first of the pair leaves the index naming nobody for that URL
            // (the duplicate keeps fetching); the next start indexes the survivor.
            r.remove_feed("a").await.unwrap();
            let left = r.all_feeds().await.unwrap();
            let third = r.index_urls(&left).await.unwrap();
            assert_eq!((third.indexed, third.duplicates.len()), (1, 0));
            assert_eq!(
                r.feed_by_url("https://h.test/one")
                    .await
                    .unwrap()
                    .map(|f| f.id),
                Some("c".to_string())
            );
        });
    }
}
