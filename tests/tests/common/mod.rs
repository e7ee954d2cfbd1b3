//! Helpers shared by the integration tests: gRPC health as a client sees it, a feed request,
//! every registered feed id, the workers, a feed's postings, polling, and a request with a
//! bearer token. Each test binary
//! uses some of them.
#![allow(dead_code)]

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::postings_client::PostingsClient;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;

/// The serving status of `service` ("" for the server as a whole) at `url`; -1 while
/// nothing answers (a cluster-mode replica changing roles rebinds its ports).
pub async fn health(url: &str, service: &str) -> i32 {
    let Ok(channel) = tonic::transport::Channel::from_shared(url.to_string())
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
    else {
        return -1;
    };
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .map_or(-1, |r| r.into_inner().status)
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

/// Registers each of `urls` as feed `f{i}` (its index) through AddFeed: a scenario farm's
/// feeds ([`kairos_tests::scenario::Farm`]).
pub async fn add_feeds(admin: &mut AdminClient<Channel>, urls: &[String]) {
    for (i, url) in urls.iter().enumerate() {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("f{i}"),
                url: url.clone(),
                weight: 1.0,
            })
            .await
            .unwrap_or_else(|e| panic!("AddFeed f{i} ({url}): {e}"));
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

/// Polls `check` every 200 ms until it returns `Some`, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn workers(admin: &mut AdminClient<Channel>) -> Vec<pb::WorkerView> {
    admin
        .list_workers(pb::ListWorkersRequest {})
        .await
        .map(|r| r.into_inner().workers)
        .unwrap_or_default()
}

/// Every posting of `feed` through the Postings API, paging by cursor.
pub async fn postings_of(client: &mut PostingsClient<Channel>, feed: &str) -> Vec<pb::Posting> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = client
            .list_postings(pb::ListPostingsRequest {
                scope: Some(pb::list_postings_request::Scope::FeedId(feed.into())),
                cursor: cursor.clone(),
                limit: 500,
            })
            .await
            .expect("list postings")
            .into_inner();
        if page.postings.is_empty() {
            return out;
        }
        out.extend(page.postings.into_iter().filter_map(|p| p.posting));
        cursor = page.next_cursor;
    }
}

/// `msg` with `authorization: Bearer token`.
pub fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

/// Sends `sig` (`-KILL`, `-STOP`, `-CONT`, ...) to `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

pub mod history;
pub mod proxy;
