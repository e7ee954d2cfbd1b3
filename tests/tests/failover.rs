//! Cluster mode under faults, with real processes on loopback: a 3-member etcd, two
//! coordinator replicas and three workers given both coordinators' addresses, fetching a
//! feed farm on one time-compressed clock (one simulated day per 15 s).
//!
//! One etcd member is killed (the quorum holds, the leader keeps serving), then the leading
//! coordinator is killed with SIGKILL while the farm publishes: the standby is elected, the
//! workers find it, and every posting the farm published appears exactly once through the
//! new leader's Postings API.

mod common;

use common::{postings_of, wait_for, workers};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::{sample, scrape, spawn_until, start_coordinator, unix_ms, TempDir};
use std::collections::BTreeMap;
use std::time::Duration;

const SCALE: f64 = 5760.0;
const FEEDS: usize = 24;
/// Simulated days during which the farm posts.
const POSTING_DAYS: f64 = 1.0;

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_mid_crawl_loses_nothing_and_duplicates_nothing() {
    let dir = TempDir::new("failover");
    let Some(mut etcd) = EtcdCluster::start(dir.path(), 3) else {
        return;
    };
    let endpoints = etcd.endpoints.join(",");
    let anchor = unix_ms().to_string();
    let clock: Vec<String> = [
        "--time-scale",
        &SCALE.to_string(),
        "--clock-start",
        "2026-03-02T00:00:00Z",
        "--clock-anchor-unix-ms",
        &anchor,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let urls_file = dir.path().join("urls.txt");
    let postings_file = dir.path().join("postings.csv");
    let mut farm_args: Vec<String> = [
        "--feeds",
        &FEEDS.to_string(),
        "--hosts",
        "6",
        "--posts-per-day",
        "24",
        "--days",
        &POSTING_DAYS.to_string(),
        "--items-per-doc",
        "500",
        "--seed",
        "12",
        "--urls-out",
        &urls_file.display().to_string(),
        "--postings-out",
        &postings_file.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    farm_args.extend(clock.iter().cloned());
    let (_farm, _) = spawn_until(
        "kairos-farm",
        &refs(&farm_args),
        &dir.path().join("farm.log"),
        &["kairos-farm ready"],
    );
    let urls: Vec<String> = std::fs::read_to_string(&urls_file)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut published: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    for line in std::fs::read_to_string(&postings_file).unwrap().lines() {
        let (f, t) = line.split_once(',').unwrap();
        published
            .entry(f.parse().unwrap())
            .or_default()
            .push(t.parse().unwrap());
    }
    let total: usize = published.values().map(Vec::len).sum();
    assert!(total > 200, "the farm publishes enough to test ({total})");

    let mut coord_args: Vec<String> = [
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        // Long enough to ride out etcd electing a new leader of its own when a member dies.
        "--leader-lease-ttl",
        "6s",
        "--replan-interval",
        "1s",
        "--worker-lease",
        "3s",
        "--fetches-per-feed-per-day",
        "12",
        "--min-fetches-per-day",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    coord_args.extend(clock.iter().cloned());
    let a = start_coordinator(&refs(&coord_args), &dir.path().join("coordinator-a.log"));
    let mut b_args: Vec<String> = [
        "serve",
        "--insecure-loopback",
        "--listen",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    b_args.extend(coord_args.iter().cloned());
    let (_b, found) = spawn_until(
        "kairos-coordinator",
        &refs(&b_args),
        &dir.path().join("coordinator-b.log"),
        &[
            "kairos-coordinator standby on ",
            "kairos-coordinator metrics on ",
        ],
    );
    let (b_url, b_metrics) = (format!("http://{}", found[0]), found[1].clone());

    let mut admin = AdminClient::connect(a.url.clone()).await.unwrap();
    for (i, url) in urls.iter().enumerate() {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("f{i}"),
                url: url.clone(),
                weight: 1.0,
            })
            .await
            .unwrap();
    }
    // Three workers, each told of both replicas (the leader first for some, last for
    // others).
    let both = format!("{},{}", a.url, b_url);
    let reversed = format!("{},{}", b_url, a.url);
    let mut running = Vec::new();
    for (i, name) in ["w1", "w2", "w3"].iter().enumerate() {
        let mut args: Vec<String> = [
            "run",
            "--coordinator",
            if i == 1 { &reversed } else { &both },
            "--name",
            name,
            "--allow-private",
            "127.0.0.0/8",
            "--host-gap",
            "5ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(clock.iter().cloned());
        let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
        cmd.args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap());
        running.push(kairos_tests::Child(cmd.spawn().unwrap()));
    }
    wait_for(
        "three workers sharing the hosts on A",
        Duration::from_secs(30),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == 3 && w.iter().map(|w| w.hosts).sum::<u32>() == 6).then_some(())
            }
        },
    )
    .await;

    // One etcd member goes: two of three keep the quorum, and A keeps taking writes.
    etcd.kill(2);
    tokio::time::sleep(Duration::from_secs(2)).await;
    admin
        .add_user(pb::AddUserRequest {
            user_id: "ann".into(),
            weight: 1.0,
        })
        .await
        .expect("A takes writes with one etcd member down");
    assert_eq!(sample(&scrape(&a.metrics), "kairos_leader"), Some(1.0));
    let before = sample(&scrape(&a.metrics), "kairos_fetches_total{outcome=\"ok\"}");
    assert!(before.unwrap_or(0.0) > 0.0, "A's workers fetched");

    // A dies mid-crawl (the farm is still publishing): B takes over and the workers find it.
    let killed_at = (unix_ms() - anchor.parse::<i64>().unwrap()) as f64 * SCALE / 86_400_000.0;
    assert!(
        killed_at < POSTING_DAYS * 0.8,
        "the kill comes while the farm publishes (day {killed_at:.2})"
    );
    drop(admin);
    drop(a);
    etcd.restart(2);
    let mut admin_b = wait_for("B elected", Duration::from_secs(30), || {
        let url = b_url.clone();
        async move {
            let mut c = AdminClient::connect(url).await.ok()?;
            c.list_workers(pb::ListWorkersRequest {}).await.ok()?;
            Some(c)
        }
    })
    .await;
    wait_for("the three workers on B", Duration::from_secs(30), || {
        let mut admin = admin_b.clone();
        async move {
            let w = workers(&mut admin).await;
            (w.len() == 3 && w.iter().map(|w| w.hosts).sum::<u32>() == 6).then_some(())
        }
    })
    .await;
    assert_eq!(sample(&scrape(&b_metrics), "kairos_leader"), Some(1.0));
    // The user written while a member was down survived the failover.
    let users = admin_b
        .list_users(pb::ListUsersRequest {
            after_user_id: String::new(),
            limit: 100,
        })
        .await
        .unwrap()
        .into_inner()
        .users;
    assert!(users.iter().any(|u| u.user_id == "ann"), "{users:?}");

    // Run until the farm has been quiet for a simulated day, then count.
    let end = anchor.parse::<i64>().unwrap() + ((POSTING_DAYS + 1.1) * 86_400_000.0 / SCALE) as i64;
    let wait = (end - unix_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let mut postings = PostingsClient::connect(b_url.clone()).await.unwrap();
    let mut found = 0;
    for (i, times) in &published {
        let got = postings_of(&mut postings, &format!("f{i}")).await;
        let mut ids: Vec<u64> = got.iter().map(|p| p.item_id_hash).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), got.len(), "feed f{i}: a posting stored twice");
        let mut got_times: Vec<i64> = got.iter().filter_map(|p| p.published_unix_ms).collect();
        got_times.sort_unstable();
        let mut want = times.clone();
        want.sort_unstable();
        assert_eq!(got_times, want, "feed f{i}: postings missing or extra");
        found += got.len();
    }
    assert_eq!(found, total);
    // Each feed's last slot is stored with its state, so B compares against A's too.
    assert_eq!(
        sample(&scrape(&b_metrics), "kairos_fetches_same_slot_total"),
        Some(0.0),
        "a planned slot was fetched by two workers across the failover"
    );
    eprintln!(
        "{total} postings, each exactly once, through a leader kill at simulated day {killed_at:.2}"
    );
}
