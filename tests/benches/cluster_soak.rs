//! Soak of cluster mode under faults, with the real binaries: a 3-member etcd, two
//! coordinator replicas on `--store etcd`, W workers and a farm of N feeds over H hosts
//! publishing on a compressed clock, for a set wall time. Each replica runs in a network
//! namespace of its own, reached through a second namespace that routes for it, so the
//! leader can be cut off from etcd and from the workers while both keep running.
//!
//! Faults, one every `--fault-every` wall minutes, in turn:
//!
//! * a worker SIGKILLed, started again 20 s later;
//! * the leader SIGKILLed, started again (as a standby) 30 s later;
//! * the leader paused (SIGSTOP) for its lease plus 10 s, then resumed;
//! * the leader partitioned from etcd and the workers (every packet to or from its
//!   namespace silently dropped by its router) for its lease plus 20 s, then healed;
//! * an etcd member SIGKILLed, started again 60 s later;
//! * a worker stopped with SIGTERM as a rollout would, started again 20 s later.
//!
//! Per fault it measures the time from the fault until one replica serves with every worker
//! attached and the farm's hosts all dealt (polled every half second), and the fetches the
//! farm did not serve meanwhile against its rate before the fault. Every 30 s it prints the
//! farm's fetch rate against the plan's, the leader's memory and etcd's DB size. Every two
//! simulated days (inside the postings' retention) it reads every feed's postings through
//! the leader; at the end it compares them with every posting the farm published (lost,
//! duplicated) and sums, over every leader, the fetches the coordinator saw twice for one
//! planned slot.
//!
//! It needs root and `ip` (iproute2) to make its namespaces, and addresses 10.213.0.0/16 and
//! 10.214.0.0/16 free; it removes what it made when it ends. Run (docs/BENCHMARKS.md has the
//! figures):
//! `cargo build --release --workspace --bins && cargo bench -p kairos-tests --bench \
//!   cluster_soak -- --feeds 100000 --hosts 500 --workers 4 --minutes 30 --sim-days 7`
//! The exit status is non-zero if anything was lost or duplicated, a slot was fetched twice
//! or a fault never settled; the logs are then kept.

mod soak_common;

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::{bin, spawn_command_until, try_scrape, unix_ms, Child, TempDir};
use soak_common::args::Shape;
use soak_common::net::Net;
use soak_common::{missing, rss_mb, sweep, total, Bearer, Farm, FarmShape, Seen};
use std::collections::{HashMap, VecDeque};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::health_check_response::ServingStatus;

/// The bench's own token (every scope but `worker`).
const TOKEN: &str = "soak-operator-0123456789abcdef";
/// Replicas of the coordinator.
const REPLICAS: usize = 2;
/// Each replica's gRPC port inside its namespace.
const PORT: u16 = 7700;

/// What this soak is told: the shared shape, its simulated days and its faults.
#[derive(clap::Parser, Clone, Debug)]
#[command(about = "Soak of cluster mode: etcd, two replicas, workers, faults in turn")]
struct Soak {
    #[command(flatten)]
    shape: Shape,
    /// Simulated days the run covers.
    #[arg(long, default_value_t = 7.0)]
    sim_days: f64,
    /// Simulated days at the end with nothing published.
    #[arg(long, default_value_t = 1.0)]
    quiet_days: f64,
    /// Wall minutes between faults.
    #[arg(long, default_value_t = 3.5)]
    fault_every: f64,
    /// The leader's lease, seconds.
    #[arg(long, default_value_t = 10.0)]
    lease: f64,
}

impl Soak {
    /// Simulated seconds per wall second.
    fn scale(&self) -> f64 {
        self.shape.scale(self.sim_days, self.quiet_days)
    }
}

/// One coordinator replica.
struct Replica {
    i: usize,
    child: Option<Child>,
    url: String,
    metrics: String,
    /// Same-slot fetches this incarnation last exported.
    same_slot: f64,
}

/// Starts replica `i` in its namespace and waits until it leads (`leads`) or stands by.
fn start_replica(
    i: usize,
    leads: bool,
    net: &Net,
    etcd: &EtcdCluster,
    s: &Soak,
    clock: &[String],
    dir: &TempDir,
) -> Replica {
    let at = Net::replica_ip(i);
    let listen = format!("{at}:{PORT}");
    let metrics = format!("{at}:9100");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &net.ns(i)])
        .arg(bin("kairos-coordinator"))
        .args([
            "serve",
            "--listen",
            &listen,
            "--advertise",
            &listen,
            "--metrics-addr",
            &metrics,
            "--tokens",
            &dir.path().join("tokens").display().to_string(),
            "--allow-private",
            "127.0.0.0/8",
            "--store",
            "etcd",
            "--etcd-endpoints",
            &etcd.endpoints_at(&Net::root_ip(i)).join(","),
            "--etcd-prefix",
            "/soak/",
            "--leader-lease-ttl",
            &format!("{}s", s.lease),
            "--worker-lease",
            "10s",
            "--fetches-per-feed-per-day",
            &s.shape.fetches_per_feed_per_day.to_string(),
            "--min-fetches-per-day",
            "1",
            // The workers' politeness gap, so the plan caps hosts where the workers will.
            "--host-gap",
            "20ms",
            "--max-worker-capacity",
            "2000",
            // etcd's history compacted once a simulated hour, as the default does on a
            // real clock: once a wall hour would keep 14 simulated days of history here.
            "--store-compaction-interval",
            &format!("{:.0}s", (3600.0 / s.scale()).max(10.0)),
        ])
        .args(clock);
    let wait = if leads {
        "kairos-coordinator listening on "
    } else {
        "kairos-coordinator standby on "
    };
    let log = dir.path().join(format!("replica{i}-{}.log", unix_ms()));
    let (child, _) = spawn_command_until(cmd, "kairos-coordinator", &log, &[wait]);
    Replica {
        i,
        child: Some(child),
        url: format!("http://{listen}"),
        metrics,
        same_slot: 0.0,
    }
}

fn start_worker(name: &str, coordinators: &str, clock: &[String], dir: &TempDir) -> Child {
    let mut cmd = Command::new(bin("kairos-worker"));
    cmd.args([
        "run",
        "--coordinator",
        coordinators,
        "--name",
        name,
        "--token-file",
        &dir.path()
            .join(format!("{name}.token"))
            .display()
            .to_string(),
        "--allow-private",
        "127.0.0.0/8",
        "--host-gap",
        "20ms",
        "--capacity",
        "600",
        "--max-in-flight",
        "128",
        "--fetch-timeout",
        "10s",
        "--drain-timeout",
        "5s",
    ])
    .args(clock)
    .stdout(std::process::Stdio::null())
    .stderr(
        std::fs::File::create(dir.path().join(format!("{name}-{}.log", unix_ms())))
            .expect("worker log"),
    );
    Child(cmd.spawn().expect("start kairos-worker"))
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

fn admin(
    url: &str,
    timeout: Duration,
) -> AdminClient<tonic::service::interceptor::InterceptedService<Channel, Bearer>> {
    let channel = Endpoint::from_shared(url.to_string())
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .timeout(timeout)
        .connect_lazy();
    AdminClient::with_interceptor(channel, Bearer::new(Some(TOKEN)))
}

/// Whether `url` serves (gRPC health), within about a second: a paused or cut-off replica
/// does not answer at all.
async fn serving(url: &str) -> bool {
    let channel = Endpoint::from_shared(url.to_string())
        .unwrap()
        .connect_timeout(Duration::from_millis(500))
        .timeout(Duration::from_millis(800))
        .connect_lazy();
    tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32)
}

/// The replica that serves with every worker attached and every host dealt, if one does.
async fn settled(replicas: &[Replica], workers: usize, hosts: usize) -> Option<usize> {
    for r in replicas {
        if r.child.is_none() || !serving(&r.url).await {
            continue;
        }
        let Ok(w) = admin(&r.url, Duration::from_secs(3))
            .list_workers(pb::ListWorkersRequest {})
            .await
        else {
            continue;
        };
        let w = w.into_inner().workers;
        if w.len() == workers && w.iter().map(|w| w.hosts as usize).sum::<usize>() == hosts {
            return Some(r.i);
        }
    }
    None
}

/// The replica that serves now, if one does.
async fn leader(replicas: &[Replica]) -> Option<usize> {
    for r in replicas {
        if r.child.is_some() && serving(&r.url).await {
            return Some(r.i);
        }
    }
    None
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    WorkerKill,
    LeaderKill,
    LeaderPause,
    LeaderPartition,
    EtcdMemberKill,
    WorkerTerm,
}

const FAULTS: [Fault; 6] = [
    Fault::WorkerKill,
    Fault::LeaderKill,
    Fault::LeaderPause,
    Fault::LeaderPartition,
    Fault::EtcdMemberKill,
    Fault::WorkerTerm,
];

/// A fault under way: what undoes it and when, and what was measured of it.
struct Episode {
    fault: Fault,
    at: Instant,
    sim_day: f64,
    /// Whom it hit: a replica, a worker or an etcd member.
    target: usize,
    undo_at: Instant,
    undone: bool,
    /// The farm's count and rate (requests a second) when it came.
    served_at: f64,
    rate: f64,
    /// From the fault until one replica serves with every worker attached.
    settled: Option<(Duration, usize)>,
    /// Wall time with no replica serving, in half-second polls.
    unserved: Duration,
    /// Requests the farm missed against its rate before, until settled plus 30 s.
    fetches_lost: Option<f64>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let s = <Soak as clap::Parser>::parse();
    let scale = s.scale();
    println!("cluster soak: {s:?}, {scale:.0}x simulated time");
    let dir = TempDir::new("cluster-soak");
    let net = Net::create(REPLICAS);
    let mut tokens = format!("soak admin:read,admin:write,ingest,postings {TOKEN}\n");
    for w in 0..s.shape.workers() {
        let t = format!("w{w}-worker-token-0123456789abcdef");
        tokens.push_str(&format!("w{w} worker {t}\n"));
        dir.write(&format!("w{w}.token"), &format!("{t}\n"));
    }
    dir.write("tokens", &tokens);
    let ips: Vec<String> = (0..REPLICAS).map(Net::root_ip).collect();
    let mut etcd = EtcdCluster::start_also_on(dir.path(), 3, &ips).expect("etcd");

    let anchor = unix_ms();
    let clock: Vec<String> = [
        "--time-scale".to_string(),
        scale.to_string(),
        "--clock-start".into(),
        "2026-03-02T00:00:00Z".into(),
        "--clock-anchor-unix-ms".into(),
        anchor.to_string(),
    ]
    .to_vec();
    let sim_day = move || (unix_ms() - anchor) as f64 * scale / 86_400_000.0;
    let farm = Farm::start(
        &FarmShape {
            feeds: s.shape.feeds,
            hosts: s.shape.hosts,
            posts_per_day: s.shape.posts_per_day,
            days: s.sim_days - s.quiet_days,
            bursts: s.shape.bursts,
            seed: s.shape.seed,
        },
        &clock,
        dir.path(),
    );
    let total_published = farm.total();

    let mut replicas: Vec<Replica> = (0..REPLICAS)
        .map(|i| start_replica(i, i == 0, &net, &etcd, &s, &clock, &dir))
        .collect();

    // Register the feeds through the leader, 16 calls in flight.
    let t = Instant::now();
    let urls = Arc::new(farm.urls.clone());
    let mut adds = tokio::task::JoinSet::new();
    for lane in 0..16 {
        let (mut admin, urls) = (
            admin(&replicas[0].url, Duration::from_secs(30)),
            urls.clone(),
        );
        adds.spawn(async move {
            for i in (lane..urls.len()).step_by(16) {
                admin
                    .add_feed(pb::AddFeedRequest {
                        feed_id: format!("f{i}"),
                        url: urls[i].clone(),
                        weight: 1.0,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("add f{i}: {e}"));
            }
        });
    }
    while let Some(r) = adds.join_next().await {
        r.unwrap();
    }
    println!(
        "registered {} feeds in {:.1} s (simulated day {:.2})",
        s.shape.feeds,
        t.elapsed().as_secs_f64(),
        sim_day()
    );

    // The checker of histories: a client calling both replicas through every fault.
    let client_feeds = farm.urls[0]
        .rsplit_once('/')
        .map_or("", |(base, _)| base)
        .to_string();
    let mut history = soak_common::history::History::start(
        replicas.iter().map(|r| r.url.clone()).collect(),
        &replicas[0].url,
        TOKEN,
        &format!("{client_feeds}/{{id}}"),
    )
    .await;

    // Each worker is told of both replicas, in turn first.
    let order = |w: usize| {
        let mut u: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
        u.rotate_left(w % REPLICAS);
        u.join(",")
    };
    let lists: Vec<String> = (0..s.shape.workers()).map(order).collect();
    let mut workers: Vec<Option<Child>> = (0..s.shape.workers())
        .map(|w| Some(start_worker(&format!("w{w}"), &lists[w], &clock, &dir)))
        .collect();
    let t = Instant::now();
    while settled(&replicas, s.shape.workers(), s.shape.hosts)
        .await
        .is_none()
    {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "the workers did not share the hosts"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "{} workers hold the {} hosts after {:.1} s",
        s.shape.workers(),
        s.shape.hosts,
        t.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let run = Duration::from_secs_f64(s.shape.minutes * 60.0);
    // No fault in the last stretch: the farm's quiet days, so every feed is fetched again.
    let faults_until = Duration::from_secs_f64(
        (s.shape.minutes * 60.0) * (s.sim_days - s.quiet_days) / s.sim_days,
    );
    let fault_every = Duration::from_secs_f64(s.fault_every * 60.0);
    let sweep_every = Duration::from_secs_f64(2.0 * 86_400.0 / scale);
    let sample_every = Duration::from_secs(30);
    let mut next_fault = started + fault_every;
    let mut next_sweep = started + sweep_every;
    let mut next_sample = started + sample_every;
    let mut seen: Vec<Seen> = vec![HashMap::new(); s.shape.feeds];
    let mut duplicates = 0u64;
    let mut episodes: Vec<Episode> = Vec::new();
    let mut served_log: VecDeque<(Instant, f64)> = VecDeque::new();
    let mut same_slot_done = 0.0;
    let mut exits = 0usize;
    let (mut peak_db, mut peak_leader_mb) = (0.0f64, 0.0f64);
    let mut last_sample = (farm.served(), Instant::now());
    let mut last_poll = Instant::now();
    println!(
        "{:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>9}",
        "wall_m",
        "sim_d",
        "fetch/d",
        "plan/d",
        "leader",
        "lead_MB",
        "db_MB",
        "inuse_MB",
        "postings"
    );
    while started.elapsed() < run {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = Instant::now();
        let poll = now.duration_since(last_poll);
        last_poll = now;
        let served_now = farm.served();
        served_log.push_back((now, served_now));
        while served_log
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > Duration::from_secs(60))
        {
            served_log.pop_front();
        }

        // A replica that exits on its own (a deposed leader that could not stop in time
        // does) is started again as a standby, as its supervisor would: not while its
        // namespace is cut off, where it could not reach etcd to stand by.
        let cut_off = episodes
            .last()
            .filter(|e| e.fault == Fault::LeaderPartition && !e.undone)
            .map(|e| e.target);
        for r in replicas.iter_mut() {
            let exited = r
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.0.try_wait(), Ok(Some(_))));
            if exited && cut_off != Some(r.i) {
                println!("  replica {} exited on its own; started again", r.i);
                exits += 1;
                same_slot_done += r.same_slot;
                *r = start_replica(r.i, false, &net, &etcd, &s, &clock, &dir);
            }
        }

        // Undo a fault when its time comes; measure the one under way.
        if let Some(e) = episodes.last_mut() {
            if !e.undone && now >= e.undo_at {
                e.undone = true;
                match e.fault {
                    Fault::WorkerKill | Fault::WorkerTerm => {
                        workers[e.target] = Some(start_worker(
                            &format!("w{}", e.target),
                            &lists[e.target],
                            &clock,
                            &dir,
                        ));
                    }
                    Fault::LeaderKill => {
                        same_slot_done += replicas[e.target].same_slot;
                        replicas[e.target] =
                            start_replica(e.target, false, &net, &etcd, &s, &clock, &dir);
                    }
                    Fault::LeaderPause => {
                        if let Some(c) = &replicas[e.target].child {
                            signal(c.0.id(), "-CONT");
                        }
                    }
                    Fault::LeaderPartition => net.heal(e.target),
                    Fault::EtcdMemberKill => etcd.restart(e.target),
                }
                println!("  undone: {:?} of {}", e.fault, e.target);
            }
            if e.settled.is_none() {
                if leader(&replicas).await.is_none() {
                    e.unserved += poll;
                }
                // A replica that leads with everyone attached; for the leader's faults, the
                // other one (or the same after it came back, for an etcd member).
                if let Some(r) = settled(&replicas, s.shape.workers(), s.shape.hosts).await {
                    let other = !matches!(
                        e.fault,
                        Fault::LeaderKill | Fault::LeaderPause | Fault::LeaderPartition
                    ) || r != e.target;
                    let back =
                        !matches!(e.fault, Fault::WorkerKill | Fault::WorkerTerm) || e.undone;
                    if other && back {
                        e.settled = Some((now.duration_since(e.at), r));
                        println!(
                            "  settled: {:?} after {:.1} s, replica {r} leads",
                            e.fault,
                            now.duration_since(e.at).as_secs_f64()
                        );
                        let label = format!("{:?}", e.fault);
                        history.check(&replicas[r].url, &label).await;
                    }
                }
            } else if let (Some((took, _)), None) = (e.settled, e.fetches_lost) {
                let window = now.duration_since(e.at);
                if window >= took + Duration::from_secs(30) {
                    let expected = e.rate * window.as_secs_f64();
                    e.fetches_lost = Some((expected - (served_now - e.served_at)).max(0.0));
                }
            }
        }

        let busy = episodes
            .last()
            .is_some_and(|e| !e.undone || e.fetches_lost.is_none());
        if now >= next_fault && !busy && started.elapsed() < faults_until {
            let fault = FAULTS[episodes.len() % FAULTS.len()];
            let rate = match (served_log.front(), served_log.back()) {
                (Some(a), Some(b)) if b.0 > a.0 => {
                    (b.1 - a.1) / b.0.duration_since(a.0).as_secs_f64()
                }
                _ => 0.0,
            };
            let lead = leader(&replicas).await.unwrap_or(0);
            let lease = Duration::from_secs_f64(s.lease);
            let (target, undo_in) = match fault {
                Fault::WorkerKill | Fault::WorkerTerm => {
                    let w = episodes.len() % s.shape.workers();
                    let sig = if fault == Fault::WorkerKill {
                        "-KILL"
                    } else {
                        "-TERM"
                    };
                    if let Some(c) = workers[w].take() {
                        signal(c.0.id(), sig);
                        // Dropping the handle kills what is left and reaps it.
                        if sig == "-TERM" {
                            tokio::time::sleep(Duration::from_secs(6)).await;
                        }
                        drop(c);
                    }
                    (w, Duration::from_secs(20))
                }
                Fault::LeaderKill => {
                    replicas[lead].child = None;
                    (lead, Duration::from_secs(30))
                }
                Fault::LeaderPause => {
                    if let Some(c) = &replicas[lead].child {
                        signal(c.0.id(), "-STOP");
                    }
                    (lead, lease + Duration::from_secs(10))
                }
                Fault::LeaderPartition => {
                    net.cut(lead);
                    (lead, lease + Duration::from_secs(20))
                }
                Fault::EtcdMemberKill => {
                    let m = (episodes.len() / FAULTS.len()) % 3;
                    etcd.kill(m);
                    (m, Duration::from_secs(60))
                }
            };
            println!(
                "  fault: {fault:?} of {target} at simulated day {:.2} (farm at {rate:.0} requests/s)",
                sim_day()
            );
            episodes.push(Episode {
                fault,
                at: Instant::now(),
                sim_day: sim_day(),
                target,
                undo_at: Instant::now() + undo_in,
                undone: false,
                served_at: served_now,
                rate,
                settled: None,
                unserved: Duration::ZERO,
                fetches_lost: None,
            });
            next_fault = Instant::now() + fault_every;
        }

        if now >= next_sweep && !busy {
            if let Some(l) = leader(&replicas).await {
                let (d, took) =
                    sweep(&replicas[l].url, Some(TOKEN), s.shape.feeds, &mut seen, 30).await;
                duplicates += d;
                println!(
                    "  postings read at simulated day {:.2}: {} items seen so far, {d} duplicated, {:.0} s",
                    sim_day(),
                    seen.iter().map(|m| m.len()).sum::<usize>(),
                    took.as_secs_f64()
                );
            }
            next_sweep = Instant::now() + sweep_every;
        }

        if now >= next_sample {
            next_sample = now + sample_every;
            // Same-slot fetches per incarnation (its process's counter); an incarnation that
            // ends adds its last count to `same_slot_done`.
            for r in &mut replicas {
                if let Some(m) = r.child.as_ref().and_then(|_| try_scrape(&r.metrics)) {
                    r.same_slot = total(&m, "kairos_fetches_same_slot_total");
                }
            }
            let lead = leader(&replicas).await;
            let scrape = lead
                .and_then(|l| try_scrape(&replicas[l].metrics))
                .unwrap_or_default();
            let db = (0..3)
                .filter(|&m| etcd.is_up(m))
                .find_map(|m| try_scrape(&etcd.endpoints[m]))
                .unwrap_or_default();
            let (db_mb, inuse_mb) = (
                total(&db, "etcd_mvcc_db_total_size_in_bytes") / 1e6,
                total(&db, "etcd_mvcc_db_total_size_in_use_in_bytes") / 1e6,
            );
            let lead_mb = lead
                .and_then(|l| replicas[l].child.as_ref())
                .map_or(0.0, |c| rss_mb(c.0.id()));
            peak_db = peak_db.max(db_mb);
            peak_leader_mb = peak_leader_mb.max(lead_mb);
            let wall = now.duration_since(last_sample.1).as_secs_f64();
            let per_day = (served_now - last_sample.0) / (wall * scale / 86_400.0);
            last_sample = (served_now, now);
            println!(
                "{:>6.1} {:>6.2} {:>9.0} {:>9.0} {:>7} {:>9.0} {:>8.1} {:>8.1} {:>9.0}",
                started.elapsed().as_secs_f64() / 60.0,
                sim_day(),
                per_day,
                total(&scrape, "kairos_plan_fetches_next_hour") * 24.0,
                lead.map_or("-".to_string(), |l| l.to_string()),
                lead_mb,
                db_mb,
                inuse_mb,
                total(&scrape, "kairos_postings_ingested_total"),
            );
        }
    }

    let end_day = sim_day();
    let last_ok = farm.last_ok();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let lead = leader(&replicas)
        .await
        .expect("a replica serves at the end");
    history.check(&replicas[lead].url, "the run").await;
    history.stop();
    let (d, took) = sweep(
        &replicas[lead].url,
        Some(TOKEN),
        s.shape.feeds,
        &mut seen,
        30,
    )
    .await;
    duplicates += d;
    println!(
        "  final read at simulated day {end_day:.2}: {:.0} s",
        took.as_secs_f64()
    );
    let m = missing(&farm.published, &seen, &last_ok);
    for r in &replicas {
        same_slot_done += try_scrape(&r.metrics)
            .map_or(r.same_slot, |m| total(&m, "kairos_fetches_same_slot_total"));
    }
    println!(
        "farm served: {}",
        farm.get("/farm/stats").replace('\n', " ")
    );
    println!("| fault | simulated day | to a leader serving with every worker attached | no replica serving | fetches lost |");
    println!("|---|---|---|---|---|");
    for e in &episodes {
        println!(
            "| {:?} ({}) | {:.2} | {} | {:.1} s | {} |",
            e.fault,
            e.target,
            e.sim_day,
            e.settled.map_or("never".to_string(), |(d, r)| format!(
                "{:.1} s (replica {r})",
                d.as_secs_f64()
            )),
            e.unserved.as_secs_f64(),
            e.fetches_lost.map_or("-".to_string(), |f| format!(
                "{f:.0} of {:.0}",
                e.rate * (e.settled.map_or(0.0, |(d, _)| d.as_secs_f64()) + 30.0)
            ))
        );
    }
    println!(
        "published {total_published}, lost {}, duplicated {duplicates}; not fetched since \
         published {}, scrolled off between fetches {}; same-slot fetches {same_slot_done}; \
         etcd DB peak {peak_db:.1} MB; leader RSS peak {peak_leader_mb:.0} MB; replicas that \
         exited on their own {exits}; {:.1} simulated days in {:.1} wall minutes; history: {} \
         calls, {} violations",
        m.lost,
        m.unfetched,
        m.scrolled,
        end_day,
        started.elapsed().as_secs_f64() / 60.0,
        history.calls().await,
        history.violations,
    );
    if !m.lost_feeds.is_empty() {
        println!("lost in: {}", m.lost_feeds.join("; "));
    }
    let failed = m.lost > 0
        || history.violations > 0
        || duplicates > 0
        || same_slot_done > 0.0
        || episodes.iter().any(|e| e.settled.is_none());
    drop(workers);
    drop(replicas);
    drop(etcd);
    drop(net);
    if failed {
        println!("logs kept in {}", dir.path().display());
        std::mem::forget(dir);
        std::process::exit(1);
    }
}
