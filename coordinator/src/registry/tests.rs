//! Tests of [`super`]: URL limits and credentials, the CRUD paths and their errors, OPML
//! import, and an import a failing store cannot half-write.

use super::*;
use crate::store::memory::MemoryBackend;
use crate::store::{Compare, StoreFuture};

#[test]
fn the_url_limit_holds_for_the_stored_percent_encoded_form() {
    // 1,358 three-byte characters: 4,096 bytes as sent, 12,244 percent-encoded.
    let raw = format!("https://feeds.example/{}", "€".repeat(1_358));
    assert!(raw.len() <= MAX_URL_BYTES);
    let err = check_url(&raw).unwrap_err().to_string();
    assert!(err.contains("once percent-encoded"), "{err}");
    let fits = format!("https://feeds.example/{}", "€".repeat(400));
    let (stored, _) = check_url(&fits).unwrap();
    assert!(stored.len() <= MAX_URL_BYTES);
}

#[test]
fn urls_with_credentials_are_refused_without_echoing_them() {
    for raw in [
        "https://alice:s3cret@feeds.example/rss",
        "https://alice@feeds.example/rss",
        "http://:s3cret@feeds.example/rss",
    ] {
        let e = check_url(raw).unwrap_err().to_string();
        assert!(e.contains("carries credentials"), "{raw}: {e}");
        assert!(!e.contains("s3cret") && !e.contains("alice"), "{raw}: {e}");
    }
    assert!(check_url("https://feeds.example/rss?user=alice").is_ok());
    // IP literals outside the public space are refused unless allowed; names pass.
    let allowed: Vec<ipnet::IpNet> = vec!["10.9.0.0/16".parse().unwrap()];
    for refused in [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:8080/rss",
        "http://[::1]/rss",
        "http://[fe80::1]/rss",
        "http://[::ffff:192.168.0.1]/rss",
        "http://100.100.100.200/rss",
        "http://0.0.0.0/rss",
        "http://10.8.0.1/rss",
    ] {
        let (url, _) = check_url(refused).unwrap();
        assert!(check_target(&url, &allowed).is_err(), "{refused}");
    }
    for taken in [
        "http://10.9.3.4/rss",
        "http://93.184.216.34/rss",
        "http://[2606:4700::1]/rss",
        "https://localhost.example/rss",
    ] {
        let (url, _) = check_url(taken).unwrap();
        assert!(check_target(&url, &allowed).is_ok(), "{taken}");
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

#[test]
fn crud_with_clear_errors_that_change_nothing() {
    rt().block_on(async {
        let r = Registry::new(Arc::new(MemoryBackend::new()));
        let f = r
            .add_feed(Some("f1"), "https://Example.org:8443/feed.xml", 0.0)
            .await
            .unwrap();
        assert_eq!((f.host.as_str(), f.weight), ("example.org:8443", 1.0));
        assert!(matches!(
            r.add_feed(Some("f1"), "https://x.test/", 1.0).await,
            Err(RegistryError::AlreadyExists(_))
        ));
        for bad in [
            "not a url",
            "ftp://x.test/f",
            "file:///etc/passwd",
            "http://",
        ] {
            assert!(
                matches!(
                    r.add_feed(None, bad, 1.0).await,
                    Err(RegistryError::InvalidArgument(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            r.add_feed(Some("a/b"), "https://x.test/", 1.0).await,
            Err(RegistryError::InvalidArgument(_))
        ));
        assert!(matches!(
            r.add_feed(None, "https://x.test/", -1.0).await,
            Err(RegistryError::InvalidArgument(_))
        ));
        for w in [1e304, f64::NAN, f64::INFINITY, MAX_WEIGHT * 2.0] {
            assert!(
                matches!(
                    r.add_feed(None, "https://x.test/", w).await,
                    Err(RegistryError::InvalidArgument(_))
                ),
                "{w}"
            );
            assert!(matches!(
                r.add_user("w", w).await,
                Err(RegistryError::InvalidArgument(_))
            ));
        }
        let long = format!("https://x.test/{}", "a".repeat(3 << 20));
        assert!(matches!(
            r.add_feed(None, &long, 1.0).await,
            Err(RegistryError::InvalidArgument(_))
        ));
        assert_eq!(
            r.list_feeds(None, 10).await.unwrap().len(),
            1,
            "failed adds changed nothing"
        );
        r.add_user("u1", 2.0).await.unwrap();
        assert!(matches!(
            r.subscribe("u1", "nope").await,
            Err(RegistryError::NotFound(_))
        ));
        assert!(matches!(
            r.subscribe("nobody", "f1").await,
            Err(RegistryError::NotFound(_))
        ));
        r.subscribe("u1", "f1").await.unwrap();
        assert!(matches!(
            r.subscribe("u1", "f1").await,
            Err(RegistryError::AlreadyExists(_))
        ));
        assert_eq!(r.subscriptions("u1").await.unwrap(), vec!["f1"]);
        assert_eq!(r.subscribers("f1").await.unwrap(), vec!["u1"]);
        r.remove_feed("f1").await.unwrap();
        assert!(
            r.subscriptions("u1").await.unwrap().is_empty(),
            "removing a feed removes its subscriptions"
        );
        assert!(matches!(
            r.remove_feed("f1").await,
            Err(RegistryError::NotFound(_))
        ));
        assert!(matches!(
            r.unsubscribe("u1", "f1").await,
            Err(RegistryError::NotFound(_))
        ));
    });
}

#[test]
fn ids_past_the_cap_are_refused_with_a_short_message() {
    rt().block_on(async {
        let r = Registry::new(Arc::new(MemoryBackend::new()));
        let at_cap = "f".repeat(MAX_ID_BYTES);
        r.add_feed(Some(&at_cap), "https://x.test/a", 1.0)
            .await
            .unwrap();
        r.add_user(&"u".repeat(MAX_ID_BYTES), 1.0).await.unwrap();
        // Two-byte characters, so the prefix the message quotes must stop on a boundary;
        // a multi-megabyte id must not come back whole in the error.
        for long in ["é".repeat(MAX_ID_BYTES / 2 + 1), "x".repeat(3 << 20)] {
            let Err(RegistryError::InvalidArgument(why)) =
                r.add_feed(Some(&long), "https://x.test/b", 1.0).await
            else {
                panic!("a feed id of {} bytes was accepted", long.len());
            };
            assert!(why.contains(&format!("{} bytes", long.len())), "{why}");
            assert!(why.len() < 200, "{why}");
            let Err(RegistryError::InvalidArgument(why)) = r.add_user(&long, 1.0).await else {
                panic!("a user id of {} bytes was accepted", long.len());
            };
            assert!(why.starts_with("user id of"), "{why}");
        }
        assert_eq!(r.list_feeds(None, 10).await.unwrap().len(), 1);
        // The URL the refused feed named is still free.
        r.add_feed(None, "https://x.test/b", 1.0).await.unwrap();
    });
}

#[test]
fn opml_import_adds_subscribes_and_skips() {
    rt().block_on(async {
        let r = Registry::new(Arc::new(MemoryBackend::new()));
        r.add_user("u", 1.0).await.unwrap();
        let opml = r#"<?xml version="1.0"?><opml version="2.0"><head><title>s</title></head><body>
            <outline text="News"><outline text="A" type="rss" xmlUrl="https://a.test/feed"/>
            <outline text="B" xmlUrl="https://b.test/atom.xml"/><outline text="bad" xmlUrl="gopher://c.test/"/></outline>
            <outline text="folder only"/></body></opml>"#;
        let got = r.import_opml(opml, Some("u")).await.unwrap();
        assert_eq!((got.feeds_added, got.feeds_already_present, got.subscriptions_added, got.skipped.len()), (2, 0, 2, 1));
        let again = r.import_opml(opml, Some("u")).await.unwrap();
        assert_eq!((again.feeds_added, again.feeds_already_present, again.subscriptions_added), (0, 2, 0));
        let empty = "<opml version=\"2.0\"><body></body></opml>";
        assert!(matches!(r.import_opml(empty, None).await, Err(RegistryError::InvalidArgument(_))));
        assert!(matches!(r.import_opml("<rss/>", None).await, Err(RegistryError::InvalidArgument(_))));
        assert!(matches!(r.import_opml("<opml", None).await, Err(RegistryError::InvalidArgument(_))));
        assert!(matches!(r.import_opml(opml, Some("ghost")).await, Err(RegistryError::NotFound(_))));
        // Thousands of nested outlines overflowed the tree parser's stack and aborted the
        // process; too many outlines held the registry for a minute.
        let nested = |n: usize| {
            let mut s = String::from("<opml><body>");
            for i in 0..n {
                s.push_str(&format!("<outline xmlUrl=\"https://n{i}.test/\">"));
            }
            s.push_str(&"</outline>".repeat(n));
            s + "</body></opml>"
        };
        let err = r.import_opml(&nested(5_000), None).await.unwrap_err();
        assert!(err.to_string().contains("deeper than 64"), "{err}");
        assert_eq!(r.import_opml(&nested(40), None).await.unwrap().feeds_added, 40);
        let many = format!(
            "<opml><body>{}</body></opml>",
            (0..10_001).map(|i| format!("<outline xmlUrl=\"https://m{i}.test/\"/>")).collect::<String>()
        );
        let err = r.import_opml(&many, None).await.unwrap_err();
        assert!(err.to_string().contains("more than 10000 outlines"), "{err}");
    });
}

/// A store whose writes fail (a full disk): reads go to the inner store.
struct FullDisk(MemoryBackend);

impl KvBackend for FullDisk {
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>> {
        self.0.get_revision(key)
    }
    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>> {
        self.0.get_many(keys)
    }
    fn batch(&self, _: Vec<Op>) -> StoreFuture<'_, ()> {
        Box::pin(async { Err(StoreError("no space left on device".into())) })
    }
    fn txn(&self, _: Vec<Compare>, _: Vec<Op>) -> StoreFuture<'_, bool> {
        Box::pin(async { Err(StoreError("no space left on device".into())) })
    }
    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, crate::store::Pairs> {
        self.0.range(prefix, after, limit)
    }
}

#[test]
fn an_import_that_cannot_be_written_leaves_nothing() {
    rt().block_on(async {
        let inner = MemoryBackend::new();
        let r = Registry::new(Arc::new(FullDisk(inner)));
        let opml = r#"<opml version="2.0"><body><outline xmlUrl="https://a.test/feed"/><outline xmlUrl="https://b.test/feed"/><outline xmlUrl="https://a.test/feed"/></body></opml>"#;
        assert!(matches!(r.import_opml(opml, None).await, Err(RegistryError::Store(_))));
        assert!(r.all_feeds().await.unwrap().is_empty(), "nothing half-imported");
        // The same document on a working store: two feeds (the duplicate outline once).
        let ok = Registry::new(Arc::new(MemoryBackend::new()));
        let got = ok.import_opml(opml, None).await.unwrap();
        assert_eq!((got.feeds_added, got.feeds_already_present), (2, 0));
    });
}
