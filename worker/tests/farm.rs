//! The feed farm served over loopback, fetched and parsed by the real fetcher and parser.

use kairos_farm::farm::{Farm, FarmConfig};
use kairos_runtime::clock::SimClock;
use kairos_worker::fetch::{FetchConfig, Fetcher, Outcome, Validators};
use kairos_worker::parse::parse;
use kairos_worker::target::TargetPolicy;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn farm_documents_fetch_parse_and_revalidate() {
    let cfg = FarmConfig {
        feeds: 40,
        hosts: 4,
        days: 10.0,
        seed: 5,
        faults: Default::default(),
        ..FarmConfig::default()
    };
    let farm = Arc::new(Farm::generate(
        cfg,
        SimClock::new(1_700_000_000_000 - 3 * 86_400_000, 1.0),
    ));
    let running = farm.clone().serve().await.unwrap();
    assert_eq!(running.hosts.len(), 4);
    let distinct: HashSet<_> = running.hosts.iter().map(|a| a.ip()).collect();
    assert_eq!(distinct.len(), 4, "each host is its own loopback address");
    let fetcher = Fetcher::new(FetchConfig {
        total_timeout: Duration::from_secs(5),
        policy: TargetPolicy::allowing(vec!["127.0.0.0/8".parse().unwrap()]),
        ..FetchConfig::default()
    })
    .unwrap();
    let mut formats = HashSet::new();
    for (i, url) in running.urls.iter().enumerate() {
        let got = fetcher.fetch(url, &Validators::default()).await;
        let Outcome::Ok { body, .. } = &got.outcome else {
            panic!("{url}: {:?}", got.outcome)
        };
        let feed = parse(body).unwrap_or_else(|e| panic!("{url}: {e}"));
        formats.insert(format!("{:?}", feed.format));
        // Time keeps moving (real-time clock here), so compare against the bounds.
        let published = farm.published_by(i, i64::MAX).min(15);
        assert!(feed.items.len() <= published, "{url}");
        for item in &feed.items {
            assert!(
                item.published_unix_ms.is_some(),
                "{url}: farm items carry dates"
            );
        }
        // Unchanged feed: the ETag gives a 304.
        let again = fetcher.fetch(url, &got.validators).await;
        assert_eq!(again.outcome, Outcome::NotModified, "{url}");
    }
    assert_eq!(
        formats.len(),
        2,
        "both RSS and Atom are served: {formats:?}"
    );
    let total: usize = (0..40)
        .map(|i| farm.published_by(i, farm.feeds()[i].postings.last().copied().unwrap_or(0)))
        .sum();
    assert!(total > 40 * 10, "ten days at ~4 a day: {total}");
}

#[test]
fn documents_hold_the_last_items_and_grow_with_time() {
    let farm = Farm::generate(
        FarmConfig {
            feeds: 3,
            hosts: 1,
            pad_bytes: 600,
            seed: 9,
            faults: Default::default(),
            ..FarmConfig::default()
        },
        SimClock::new(0, 1.0),
    );
    for i in 0..3 {
        let posts = &farm.feeds()[i].postings;
        assert!(!posts.is_empty());
        let mid = posts[posts.len() / 2];
        let (doc, etag) = farm.document(i, mid);
        let parsed = parse(doc.as_bytes()).unwrap();
        assert_eq!(parsed.items.len(), farm.published_by(i, mid).min(15));
        // Newest first, and the newest is the one published at `mid`.
        assert_eq!(parsed.items[0].published_unix_ms, Some(mid));
        let (_, later) = farm.document(i, *posts.last().unwrap());
        assert_ne!(etag, later, "new postings change the ETag");
        assert!(doc.len() > 15 * 600, "padding sets the size: {}", doc.len());
    }
}
