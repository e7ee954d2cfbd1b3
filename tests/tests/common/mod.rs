//! Helpers shared by the store tests (`disk_full.rs`, `etcd_store.rs`): gRPC health as a
//! client sees it, a feed request, and every registered feed id.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use std::time::{Duration, Instant};
use tonic_health::pb::health_check_response::ServingStatus;

/// The serving status of `service` ("" for the server as a whole) at `url`.
pub async fn health(url: &str, service: &str) -> i32 {
    let channel = tonic::transport::Channel::from_shared(url.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap();
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// Polls every `every` until `service` reports `want`; fails after `within`. Returns how
/// long it took.
pub async fn wait_health(
    url: &str,
    service: &str,
    want: ServingStatus,
    within: Duration,
    every: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let got = health(url, service).await;
        if got == want as i32 {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "health stayed {got} (wanted {want:?}) for {within:?}"
        );
        tokio::time::sleep(every).await;
    }
}

/// AddFeed for `https://ID.example/feed.xml`.
pub fn add(id: &str) -> pb::AddFeedRequest {
    pb::AddFeedRequest {
        feed_id: id.into(),
        url: format!("https://{id}.example/feed.xml"),
        weight: 1.0,
    }
}

/// Every registered feed id, paging ListFeeds by `page` ids.
pub async fn feed_ids(
    admin: &mut AdminClient<tonic::transport::Channel>,
    page: u32,
) -> Vec<String> {
    let mut ids = Vec::new();
    loop {
        let feeds = admin
            .list_feeds(pb::ListFeedsRequest {
                after_feed_id: ids.last().cloned().unwrap_or_default(),
                limit: page,
            })
            .await
            .unwrap()
            .into_inner()
            .feeds;
        if feeds.is_empty() {
            return ids;
        }
        ids.extend(feeds.into_iter().map(|f| f.feed_id));
    }
}
