//! etcd full (its NOSPACE alarm), with `serve --store etcd` as a real process on a private
//! etcd with a small quota: once etcd refuses writes for space, writes answer UNAVAILABLE
//! and are not acknowledged, health and `/readyz` say not ready, `kairos_store_out_of_space`
//! is 1 and reads go on; after an operator frees space, compacts, defragments and disarms
//! the alarm (the runbook in docs/OPERATIONS.md), the coordinator takes writes again by
//! itself, and everything acknowledged before is there.

mod common;

use common::{add, feed_ids, wait_health};
use etcd_client::{AlarmAction, AlarmOptions, AlarmType, Client, CompactionOptions, DeleteOptions};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::{http_status, sample, scrape, start_coordinator, TempDir};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

const POLL: Duration = Duration::from_millis(200);
/// etcd's quota: small enough to fill in a second or two.
const QUOTA: u64 = 16 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_etcd_refuses_writes_visibly_and_recovers_after_the_runbook() {
    let dir = TempDir::new("etcd-full");
    let Some(etcd) = EtcdCluster::start_with_quota(dir.path(), QUOTA) else {
        return;
    };
    let endpoints = etcd.endpoints.join(",");
    let quota = QUOTA.to_string();
    let args = [
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        "--etcd-prefix",
        "/full/",
        "--leader-lease-ttl",
        "6s",
        "--etcd-quota-bytes",
        &quota,
    ];
    let c = start_coordinator(&args, &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let id = format!("before{i}");
        admin.add_feed(add(&id)).await.unwrap();
        acked.push(id);
    }
    assert_eq!(
        sample(&scrape(&c.metrics), "kairos_store_out_of_space"),
        Some(0.0)
    );

    // Something else fills etcd (another tenant, or history nobody compacted) until it
    // raises its alarm.
    let mut etcd_client = Client::connect([etcd.endpoints[0].as_str()], None)
        .await
        .unwrap();
    let ballast = vec![b'x'; 512 << 10];
    let mut filled = 0;
    loop {
        match etcd_client
            .put(format!("/ballast/{filled}"), ballast.clone(), None)
            .await
        {
            Ok(_) => filled += 1,
            Err(e) => {
                assert!(e.to_string().contains("database space exceeded"), "{e}");
                break;
            }
        }
        assert!(
            filled < 200,
            "etcd took {filled} × 512 KiB past a 16 MiB quota"
        );
    }

    // A write is refused, not acknowledged, and says why.
    let refused = admin.add_feed(add("during")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("space"),
        "the status names the cause: {}",
        refused.message()
    );
    // So is a change of settings: a store that cannot take it is UNAVAILABLE (retry), not
    // INVALID_ARGUMENT (the settings were fine), and the settings in force stay.
    let before = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .unwrap()
        .into_inner();
    let refused = admin
        .update_settings(pb::SettingsPatch {
            metric: Some("miss".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("space"), "{}", refused.message());
    assert_eq!(
        admin
            .get_settings(pb::GetSettingsRequest {})
            .await
            .unwrap()
            .into_inner(),
        before
    );
    wait_health(
        &c.url,
        "",
        ServingStatus::NotServing,
        Duration::from_secs(10),
        POLL,
    )
    .await;
    let m = scrape(&c.metrics);
    assert_eq!(sample(&m, "kairos_store_out_of_space"), Some(1.0), "{m}");
    assert_eq!(sample(&m, "kairos_store_writable"), Some(0.0));
    assert_eq!(http_status(&c.metrics, "/readyz"), Some(503));
    // Reads go on: everything acknowledged is listed.
    assert_eq!(feed_ids(&mut admin, 7).await, sorted(&acked));
    let log = std::fs::read_to_string(dir.path().join("coordinator.log")).unwrap();
    assert_eq!(
        log.matches("etcd is out of space").count(),
        1,
        "said once, however many writes fail: {log}"
    );

    // The runbook: free space, compact the history, defragment, disarm.
    let started = Instant::now();
    etcd_client
        .delete("/ballast/", Some(DeleteOptions::new().with_prefix()))
        .await
        .unwrap();
    let rev = etcd_client
        .get("/full/", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    etcd_client
        .compact(rev, Some(CompactionOptions::new().with_physical()))
        .await
        .unwrap();
    etcd_client.defragment().await.unwrap();
    // As `etcdctl alarm disarm` does: each raised alarm, by the member that raised it.
    let raised = etcd_client
        .alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .unwrap();
    assert!(!raised.alarms().is_empty(), "the NOSPACE alarm is raised");
    for a in raised.alarms() {
        let mut member = AlarmOptions::new();
        member.with_member(a.member_id());
        etcd_client
            .alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(member))
            .await
            .unwrap();
    }

    let took = wait_health(
        &c.url,
        "",
        ServingStatus::Serving,
        Duration::from_secs(10),
        POLL,
    )
    .await;
    eprintln!(
        "serving again {took:?} after the alarm was disarmed ({:?} after the runbook began)",
        started.elapsed()
    );
    assert_eq!(
        sample(&scrape(&c.metrics), "kairos_store_out_of_space"),
        Some(0.0)
    );
    assert_eq!(http_status(&c.metrics, "/readyz"), Some(200));
    admin.add_feed(add("after")).await.unwrap();
    acked.push("after".into());
    assert_eq!(feed_ids(&mut admin, 7).await, sorted(&acked));
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}
