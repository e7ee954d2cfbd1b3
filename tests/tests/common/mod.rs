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

/// What the run knows of farm feed `f{index}` whose postings did not all arrive, for a
/// failing assertion's message: when the farm last served it, its health and plan as the
/// coordinator sees them, the workers, and the lines of the logs in `logs` that name it.
/// A flaky loss on a CI machine leaves only this message behind.
pub async fn account_of_feed(
    admin: &mut AdminClient<Channel>,
    farm: &kairos_tests::scenario::Farm,
    index: usize,
    logs: &std::path::Path,
) -> String {
    use kairos_tests::scenario::Clock;
    let id = format!("f{index}");
    let mut out = String::new();
    let day = |ms: i64| format!("day {:.3}", Clock::day_of(ms));
    let published: Vec<String> = farm
        .published
        .get(&index)
        .map(|t| t.iter().map(|&t| day(t)).collect())
        .unwrap_or_default();
    out.push_str(&format!("{id} published at {published:?}\n"));
    match farm.last_served().get(&index) {
        Some(&t) => out.push_str(&format!("the farm last served it at {}\n", day(t))),
        None => out.push_str("the farm never served it\n"),
    }
    match admin
        .get_feed(pb::GetFeedRequest {
            feed_id: id.clone(),
        })
        .await
    {
        Ok(f) => {
            let f = f.into_inner();
            out.push_str(&format!(
                "coordinator: status {:?}, host {}, {} failures in a row, last error {:?}\n",
                f.status, f.host, f.consecutive_failures, f.last_error
            ));
        }
        Err(e) => out.push_str(&format!("GetFeed: {e}\n")),
    }
    match admin
        .inspect_feed_plan(pb::InspectFeedPlanRequest {
            feed_id: id.clone(),
        })
        .await
    {
        Ok(p) => {
            let p = p.into_inner();
            out.push_str(&format!(
                "plan: {:.2} fetches a day, offsets {:?} s of a {} s period, not before {}, \
                 {} postings observed, constraints {:?}\n",
                p.fetches_per_day,
                p.fetch_offsets_seconds,
                p.period_seconds,
                if p.not_before_unix_ms > 0 {
                    day(p.not_before_unix_ms)
                } else {
                    "-".into()
                },
                p.observed_postings,
                p.constraints
            ));
        }
        Err(e) => out.push_str(&format!("InspectFeedPlan: {e}\n")),
    }
    for w in workers(admin).await {
        out.push_str(&format!(
            "worker {}: {} hosts, {} feeds, version {}/{}, backlog {}\n",
            w.worker_id, w.hosts, w.feeds, w.applied_version, w.desired_version, w.report_backlog
        ));
    }
    // Log lines naming the feed as a whole word (f5, not f50).
    let names = |line: &str| {
        line.match_indices(&id).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + id.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_alphanumeric())
        })
    };
    let mut files: Vec<_> = std::fs::read_dir(logs)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| names(l)).collect();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        out.push_str(&format!("{name}: {} lines name {id}\n", lines.len()));
        for l in lines.iter().rev().take(20).rev() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out
}

/// Checks that the Postings API at `url` holds every posting `farm` published, each once;
/// a feed short of any panics with its [`account_of_feed`] (logs read from `logs`).
/// Returns how many postings it found.
pub async fn assert_every_posting_once(
    url: &str,
    farm: &kairos_tests::scenario::Farm,
    logs: &std::path::Path,
) -> usize {
    let mut postings = PostingsClient::connect(url.to_string()).await.unwrap();
    let mut found = 0;
    for (i, times) in &farm.published {
        let got = postings_of(&mut postings, &format!("f{i}")).await;
        let mut ids: Vec<u64> = got.iter().map(|p| p.item_id_hash).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), got.len(), "feed f{i}: a posting stored twice");
        let mut got_times: Vec<i64> = got.iter().filter_map(|p| p.published_unix_ms).collect();
        got_times.sort_unstable();
        let mut want = times.clone();
        want.sort_unstable();
        if got_times != want {
            let mut admin = AdminClient::connect(url.to_string()).await.unwrap();
            let account = account_of_feed(&mut admin, farm, *i, logs).await;
            assert_eq!(
                got_times, want,
                "feed f{i}: postings missing or extra\n{account}"
            );
        }
        found += got.len();
    }
    assert_eq!(found, farm.postings());
    found
}
