//! An operator's per-host limit through the real `serve` binary: the plan keeps the host's
//! feeds within it (the freed budget goes to other hosts), InspectFeedPlan says why, bad
//! limits are refused, and limits survive a restart and can be cleared.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{start_coordinator, TempDir};
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic::Code;

async fn host_rate(admin: &mut AdminClient<Channel>, prefix: &str) -> (f64, Vec<String>) {
    let mut total = 0.0;
    let mut constraints = Vec::new();
    for i in 0..4 {
        let v = match admin
            .inspect_feed_plan(pb::InspectFeedPlanRequest {
                feed_id: format!("{prefix}{i}"),
            })
            .await
        {
            Ok(v) => v.into_inner(),
            // Not planned yet (just added, or just restarted): counts as nothing planned.
            Err(e) if e.code() == Code::Unavailable => return (0.0, Vec::new()),
            Err(e) => panic!("{e:?}"),
        };
        total += v.fetches_per_day;
        constraints.extend(v.constraints);
    }
    (total, constraints)
}

/// Waits until the planned rate of host `prefix` satisfies `ok`.
async fn wait_rate(
    admin: &mut AdminClient<Channel>,
    prefix: &str,
    ok: impl Fn(f64) -> bool,
) -> (f64, Vec<String>) {
    let start = Instant::now();
    loop {
        let got = host_rate(admin, prefix).await;
        if ok(got.0) {
            return got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "host {prefix} stayed at {} fetches a day",
            got.0
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_limit_bounds_the_plan_is_explained_and_persists() {
    let dir = TempDir::new("host-limits");
    let data = dir.path().join("data");
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--replan-interval",
        "1s",
        "--fetches-per-feed-per-day",
        "8",
        "--min-fetches-per-day",
        "0.25",
    ];
    let c = start_coordinator(&args, &dir.path().join("coordinator-1.log"));
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    for (prefix, host) in [("a", "a.example"), ("b", "b.example")] {
        for i in 0..4 {
            admin
                .add_feed(pb::AddFeedRequest {
                    feed_id: format!("{prefix}{i}"),
                    url: format!("https://{host}/feed{i}.xml"),
                    weight: 1.0,
                })
                .await
                .unwrap();
        }
    }
    // 64 fetches a day over 8 feeds: about 32 per host before any limit.
    let (before, _) = wait_rate(&mut admin, "a", |r| r > 16.0).await;

    let set = admin
        .set_host_limit(pb::SetHostLimitRequest {
            host: "A.Example".into(),
            max_fetches_per_day: 4.0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(set.host, "a.example");
    let (limited, constraints) = wait_rate(&mut admin, "a", |r| r > 0.0 && r <= 4.0 + 1e-6).await;
    assert!(
        limited >= 1.0,
        "the host still gets its feeds' floors: {limited}"
    );
    assert!(
        constraints
            .iter()
            .any(|c| c.contains("limited by an operator to 4")),
        "{constraints:?}"
    );
    // The budget freed on a.example goes to b.example.
    let (other, _) = wait_rate(&mut admin, "b", |r| r > before + 16.0).await;
    eprintln!("a.example {before:.1} → {limited:.1} fetches/day; b.example now {other:.1}");

    for bad in [f64::NAN, -3.0, 1e9] {
        let e = admin
            .set_host_limit(pb::SetHostLimitRequest {
                host: "b.example".into(),
                max_fetches_per_day: bad,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e:?}");
    }
    let e = admin
        .set_host_limit(pb::SetHostLimitRequest {
            host: "not a host/".into(),
            max_fetches_per_day: 2.0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    // Survives a restart; then cleared, the host gets its share back.
    drop(admin);
    drop(c);
    let c = start_coordinator(&args, &dir.path().join("coordinator-2.log"));
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    let limits = admin
        .list_host_limits(pb::ListHostLimitsRequest {})
        .await
        .unwrap()
        .into_inner()
        .limits;
    assert_eq!(limits.len(), 1);
    assert_eq!(
        (limits[0].host.as_str(), limits[0].max_fetches_per_day),
        ("a.example", 4.0)
    );
    wait_rate(&mut admin, "a", |r| r > 0.0 && r <= 4.0 + 1e-6).await;
    admin
        .set_host_limit(pb::SetHostLimitRequest {
            host: "a.example".into(),
            max_fetches_per_day: 0.0,
        })
        .await
        .unwrap();
    wait_rate(&mut admin, "a", |r| r > 16.0).await;
    assert!(admin
        .list_host_limits(pb::ListHostLimitsRequest {})
        .await
        .unwrap()
        .into_inner()
        .limits
        .is_empty());
}
