//! A checker of histories across failovers, with real processes on a private etcd: a client
//! adds and removes feeds, subscribes readers and changes the budget against a cluster of
//! two coordinators while faults come on a schedule: the leader killed; the leader paused
//! past its lease and resumed (for a moment two replicas believe they lead); the leader's
//! link to etcd cut until about when its lease runs out, healing while the standby
//! campaigns; the leader's etcd answering in seconds. Every call is recorded as
//! acknowledged, refused (an answer that says nothing was written: a standby's, a write
//! fenced off by etcd, a request the registry turned down) or unknown (no answer in time, a
//! broken connection: it may or may not have taken effect, then or later). After each
//! fault, with no call in flight, what the leader shows is checked against the history:
//!
//! * every acknowledged write is there, unless a later write to the same key was
//!   acknowledged or may have happened;
//! * no refused write is there, unless another call may have made it;
//! * the budget is the last acknowledged one, or one whose call is unknown.
//!
//! Calls sent to the paused leader and answered only after it resumed show fencing in the
//! history: the deposed leader must acknowledge none of them.
//!
//! The link to etcd is cut by a proxy on loopback (`common::proxy`) that holds every byte
//! while cut, as a partition does, rather than by network namespaces: only the link between
//! one coordinator and etcd is cut, not the coordinator's link to its clients.

mod common;

use common::history::{
    add_readers, call_on, channel, check, shown, Client, Event, Op, Outcome, Shown,
};
use common::proxy::Proxy;
use common::{health, signal};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::{spawn_until, Child, TempDir};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic_health::pb::health_check_response::ServingStatus;

/// Readers and the feeds they may subscribe to (added before the faults, never removed).
const USERS: usize = 20;
const STABLE: usize = 10;
/// The URL of the feeds the client adds (never fetched: no worker runs).
const FEED_URL: &str = "https://{id}.example/feed.xml";

/// The replica that serves, alone, on two polls half a second apart, within `within`.
async fn leader(urls: &[String; 2], within: Duration) -> usize {
    let start = Instant::now();
    let mut last = None;
    loop {
        let mut serving = Vec::new();
        for (i, u) in urls.iter().enumerate() {
            if health(u, "").await == ServingStatus::Serving as i32 {
                serving.push(i);
            }
        }
        let now = (serving.len() == 1).then(|| serving[0]);
        if now.is_some() && now == last {
            return serving[0];
        }
        last = now;
        assert!(start.elapsed() < within, "no single replica serves");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in `/proc`).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            // The state follows the parenthesised command name.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    })
}

/// Runs the client for `wall` (one call at a time), then returns it.
async fn run_for(client: Arc<tokio::sync::Mutex<Client>>, wall: Duration) {
    let until = Instant::now() + wall;
    while Instant::now() < until {
        client.lock().await.step().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A replica's command line: it reaches etcd at `endpoint` and listens on `listen`.
fn replica_args(endpoint: &str, listen: &str) -> Vec<String> {
    [
        "serve",
        "--insecure-loopback",
        "--allow-private",
        "127.0.0.0/8",
        "--listen",
        listen,
        "--metrics-addr",
        "127.0.0.1:0",
        "--store",
        "etcd",
        "--etcd-endpoints",
        endpoint,
        "--etcd-prefix",
        "/history/",
        "--leader-lease-ttl",
        "3s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Starts a replica and waits until it leads (`leads`) or stands by; returns its URL.
fn replica(
    dir: &TempDir,
    name: &str,
    endpoint: &str,
    listen: &str,
    leads: bool,
) -> (Child, String) {
    let args = replica_args(endpoint, listen);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let wait = if leads {
        "kairos-coordinator listening on "
    } else {
        "kairos-coordinator standby on "
    };
    let (child, found) = spawn_until(
        "kairos-coordinator",
        &args,
        &dir.path().join(format!("{name}.log")),
        &[wait],
    );
    (child, format!("http://{}", found[0]))
}

/// Two replicas (replica `i` reaching etcd at `endpoints[i]`), the readers and the feeds
/// they subscribe to, and a client with an empty history.
struct Setup {
    urls: [String; 2],
    pids: [u32; 2],
    children: Vec<Child>,
    client: Arc<tokio::sync::Mutex<Client>>,
    initial_budget: f64,
}

async fn setup(dir: &TempDir, endpoints: [&str; 2]) -> Setup {
    let (a, a_url) = replica(dir, "a", endpoints[0], "127.0.0.1:0", true);
    let (b, b_url) = replica(dir, "b", endpoints[1], "127.0.0.1:0", false);
    let urls = [a_url, b_url];
    let mut admin = AdminClient::new(channel(&urls[0], Duration::from_secs(5)));
    add_readers(&urls[0], None, USERS).await;
    for s in 0..STABLE {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("s{s}"),
                url: format!("https://s{s}.example/feed.xml"),
                weight: 1.0,
            })
            .await
            .unwrap();
    }
    let initial_budget = shown(&urls[0], None, "", USERS).await.budget;
    let pairs = (0..USERS)
        .flat_map(|u| (0..STABLE).map(move |s| (format!("u{u}"), format!("s{s}"))))
        .collect();
    let client = Arc::new(tokio::sync::Mutex::new(Client::new(
        urls.to_vec(),
        pairs,
        42,
    )));
    Setup {
        pids: [a.0.id(), b.0.id()],
        children: vec![a, b],
        urls,
        client,
        initial_budget,
    }
}

impl Setup {
    /// With no call in flight, what the leader shows is checked against the history.
    async fn check(&self, label: &str) {
        let l = leader(&self.urls, Duration::from_secs(30)).await;
        let c = self.client.lock().await;
        let s = shown(&self.urls[l], None, "", USERS).await;
        let bad = check(&c.history, &s, self.initial_budget);
        assert!(
            bad.is_empty(),
            "after {label}, leader {l}: {} violations: {bad:#?}",
            bad.len()
        );
        eprintln!(
            "after {label}: leader {l}, {} calls checked, {} feeds and {} subscriptions shown",
            c.history.len(),
            s.feeds.len(),
            s.subscriptions.len()
        );
    }

    /// Calls acknowledged, refused and unknown so far.
    async fn counts(&self) -> (usize, usize, usize) {
        let c = self.client.lock().await;
        let count = |f: fn(&Outcome) -> bool| c.history.iter().filter(|e| f(&e.outcome)).count();
        let n = (
            count(|o| *o == Outcome::Acked),
            count(|o| matches!(o, Outcome::Refused(_))),
            count(|o| matches!(o, Outcome::Unknown(_))),
        );
        eprintln!(
            "history: {} calls, {} acknowledged, {} refused, {} unknown",
            c.history.len(),
            n.0,
            n.1,
            n.2
        );
        n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_failovers_and_refused_ones_never_appear() {
    let dir = TempDir::new("history");
    let Some(etcd) = EtcdCluster::start(dir.path(), 1) else {
        return;
    };
    let endpoint = etcd.endpoints[0].clone();
    let mut s = setup(&dir, [&endpoint, &endpoint]).await;
    let (urls, client) = (s.urls.clone(), s.client.clone());

    // Calls against A alone, then A is killed while they go on: B takes over.
    run_for(client.clone(), Duration::from_secs(3)).await;
    s.check("calls to a healthy leader").await;
    let calls = tokio::spawn(run_for(client.clone(), Duration::from_secs(8)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(s.pids[0], "-KILL");
    calls.await.unwrap();
    assert_eq!(leader(&urls, Duration::from_secs(30)).await, 1, "B leads");
    s.check("the leader was killed").await;

    // A comes back on its port and stands by.
    let a_addr = urls[0].trim_start_matches("http://").to_string();
    let (a2, _) = replica(&dir, "a2", &endpoint, &a_addr, false);
    s.pids[0] = a2.0.id();
    s.children.push(a2);

    // B is paused past its lease while calls go on. A few more wait on B itself, on a
    // connection opened before the pause: B reads them when it resumes.
    let calls = tokio::spawn(run_for(client.clone(), Duration::from_secs(12)));
    let held = channel(&urls[1], Duration::from_secs(60));
    AdminClient::new(held.clone())
        .get_settings(pb::GetSettingsRequest {})
        .await
        .expect("B answers before its pause");
    tokio::time::sleep(Duration::from_secs(1)).await;
    signal(s.pids[1], "-STOP");
    // kill(2) returns before every thread of B has stopped: wait until each one has.
    let stopped = Instant::now();
    while !all_threads_stopped(s.pids[1]) {
        assert!(stopped.elapsed() < Duration::from_secs(5), "B did not stop");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stale_ops = [
        Op::AddFeed("stale-1".into()),
        Op::Budget(9.99),
        Op::AddFeed("stale-2".into()),
        Op::Subscribe("u0".into(), "stale-1".into()),
    ];
    let stale_calls: Vec<_> = stale_ops
        .into_iter()
        .map(|op| {
            let held = held.clone();
            tokio::spawn(async move {
                let outcome = call_on(held, &op, None, FEED_URL).await;
                Event {
                    op,
                    replica: 1,
                    outcome,
                    concurrent: true,
                }
            })
        })
        .collect();
    // A takes over once B's lease is gone; then B resumes, believing it leads.
    let took = {
        let start = Instant::now();
        while health(&urls[0], "").await != ServingStatus::Serving as i32 {
            assert!(start.elapsed() < Duration::from_secs(30), "A did not lead");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        start.elapsed()
    };
    eprintln!("A leads {took:?} after B was paused (lease 3 s)");
    signal(s.pids[1], "-CONT");
    let mut stale = Vec::new();
    for c in stale_calls {
        stale.push(
            tokio::time::timeout(Duration::from_secs(60), c)
                .await
                .expect("a held call ends")
                .unwrap(),
        );
    }
    for e in &stale {
        eprintln!("held by the deposed leader: {:?} → {:?}", e.op, e.outcome);
        if let (Outcome::Acked, Op::AddFeed(id)) = (&e.outcome, &e.op) {
            // Which replica shows it, to tell a write past the fence from a misrouted call
            // (seen twice under heavy load on the test machine; not understood yet).
            for (i, u) in urls.iter().enumerate() {
                let got = AdminClient::new(channel(u, Duration::from_secs(5)))
                    .get_feed(pb::GetFeedRequest {
                        feed_id: id.clone(),
                    })
                    .await
                    .map(|r| r.into_inner().url);
                eprintln!("replica {i} on {id}: {got:?}");
            }
        }
        // Sent after its lease ran out and answered after its successor was elected: a
        // write it acknowledged would have gone past the fence.
        assert_ne!(e.outcome, Outcome::Acked, "the deposed leader wrote: {e:?}");
    }
    calls.await.unwrap();
    client.lock().await.history.extend(stale);
    s.check("the leader was paused and resumed").await;

    let (acked, refused, _) = s.counts().await;
    assert!(
        acked >= 30,
        "too few acknowledged calls to mean much: {acked}"
    );
    assert!(refused >= 1, "no refusal was exercised");
    let c = client.lock().await;
    let by_replica: Vec<usize> = (0..2)
        .map(|r| c.history.iter().filter(|e| e.replica == r).count())
        .collect();
    assert!(by_replica.iter().all(|&n| n > 0), "{by_replica:?}");
}

/// The leader cut off from etcd (a partition of that one link) until about when its lease
/// runs out, healing while the standby campaigns; then the leader's etcd answering in
/// seconds rather than not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_from_etcd_healed_mid_election_and_a_slow_etcd_keep_the_history() {
    let dir = TempDir::new("history-partition");
    let Some(etcd) = EtcdCluster::start(dir.path(), 1) else {
        return;
    };
    let proxies = [
        Proxy::start(&etcd.endpoints[0]).await,
        Proxy::start(&etcd.endpoints[0]).await,
    ];
    let s = setup(&dir, [&proxies[0].addr, &proxies[1].addr]).await;
    let (urls, client) = (s.urls.clone(), s.client.clone());
    run_for(client.clone(), Duration::from_secs(3)).await;
    s.check("calls to a healthy leader").await;

    // A's link to etcd is cut for about its lease while the calls go on.
    let calls = tokio::spawn(run_for(client.clone(), Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxies[0].cut();
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    proxies[0].heal();
    calls.await.unwrap();
    s.check("a partition of the leader from etcd, healed mid-election")
        .await;

    // The leader's etcd answers slowly: every chunk waits 0.4 s each way.
    let l = leader(&urls, Duration::from_secs(30)).await;
    let calls = tokio::spawn(run_for(client.clone(), Duration::from_secs(8)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxies[l].slow(Duration::from_millis(400));
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxies[l].heal();
    calls.await.unwrap();
    s.check("a slow etcd").await;
    let (acked, _, unknown) = s.counts().await;
    assert!(
        acked >= 30,
        "too few acknowledged calls to mean much: {acked}"
    );
    assert!(unknown >= 1, "the partition left no call unanswered");
}

/// The checker itself: lost, phantom and resurrected writes and a stale budget are found;
/// a view the history allows passes.
#[test]
fn the_checker_finds_lost_and_phantom_writes() {
    let ev = |op: Op, outcome: Outcome| Event {
        op,
        replica: 0,
        outcome,
        concurrent: false,
    };
    let refused = || Outcome::Refused("refused".into());
    let history = vec![
        ev(Op::AddFeed("a".into()), Outcome::Acked),
        ev(Op::AddFeed("b".into()), refused()),
        ev(Op::AddFeed("c".into()), Outcome::Unknown("timeout".into())),
        ev(Op::AddFeed("d".into()), Outcome::Acked),
        ev(Op::RemoveFeed("d".into()), Outcome::Acked),
        ev(Op::Subscribe("u0".into(), "s0".into()), Outcome::Acked),
        ev(Op::Subscribe("u1".into(), "s0".into()), refused()),
        ev(Op::Budget(2.5), Outcome::Acked),
        ev(Op::Budget(2.6), refused()),
    ];
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let pair = |u: &str, f: &str| (u.to_string(), f.to_string());
    let wrong = Shown {
        feeds: set(&["b", "c", "d"]),
        subscriptions: [pair("u1", "s0")].into_iter().collect(),
        budget: 2.6,
    };
    let bad = check(&history, &wrong, 1.0);
    assert_eq!(bad.len(), 6, "{bad:#?}");
    for (i, what) in [
        "feed a: its acknowledged add is lost",
        "feed b is registered",
        "feed d is registered",
        "subscription u0 → s0: acknowledged, lost",
        "subscription u1 → s0: refused",
        "budget 2.6",
    ]
    .iter()
    .enumerate()
    {
        assert!(bad[i].starts_with(what), "{}: {}", what, bad[i]);
    }
    for c_present in [false, true] {
        let mut feeds = set(&["a"]);
        if c_present {
            feeds.insert("c".into());
        }
        let right = Shown {
            feeds,
            subscriptions: [pair("u0", "s0")].into_iter().collect(),
            budget: 2.5,
        };
        assert!(check(&history, &right, 1.0).is_empty());
    }
}
