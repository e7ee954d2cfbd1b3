//! Connections a stranger opens and never uses, a process out of descriptors, and a worker
//! session's assignment streams opened and never read, against the real coordinator.
//!
//! Before: 1,000 silent or half-sent connections stayed open for good; with an open-file
//! limit of 1024 they ended the metrics server's accept loop (`/livez` refused for good)
//! and set the gRPC accept loop spinning at 100% CPU; 90 unread assignment streams of one
//! session grew the coordinator by 2 GB.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_tests::{
    http_status, sample, scrape, spawn_command_until, start_coordinator, try_scrape, Coordinator,
    TempDir,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Whether the server has closed `s` (EOF or reset), without waiting.
fn closed(mut s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(_) => false, // It answered something; still open.
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// Waits up to `within` until every connection in `conns` is closed by the server; returns
/// how long it took, or how many are still open.
fn all_closed(conns: &[TcpStream], within: Duration) -> Result<Duration, usize> {
    let start = Instant::now();
    loop {
        let open = conns.iter().filter(|s| !closed(s)).count();
        if open == 0 {
            return Ok(start.elapsed());
        }
        if start.elapsed() > within {
            return Err(open);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Up to `n` connections to `addr`, stopping at the first that is not accepted within a
/// few seconds (a listen queue that stays full: a blocking connect would wait out every SYN
/// retry, minutes).
fn connect_many(addr: &str, n: usize) -> Vec<TcpStream> {
    use std::net::ToSocketAddrs;
    let addr = addr.to_socket_addrs().unwrap().next().unwrap();
    (0..n)
        .map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(4)).ok())
        .collect()
}

/// CPU seconds the process has used (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at state; utime and
    // stime are the 14th and 15th fields overall, in clock ticks of 1/100 s.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb / 1024.0
}

fn host_of(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// Panics unless the coordinator at `url` answers an Admin call (`when` names the moment).
fn assert_grpc_answers(url: &str, when: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut admin = AdminClient::connect(url.to_string()).await.unwrap();
        if let Err(e) = admin.get_stats(pb::GetStatsRequest::default()).await {
            panic!("gRPC does not answer {when}: {e}");
        }
    });
}

fn counter(scrape: &str, metric: &str) -> f64 {
    sample(scrape, metric).unwrap_or(0.0)
}

#[test]
fn silent_connections_are_closed_and_a_flood_never_takes_the_probes() {
    let dir = TempDir::new("connections-silent");
    let log = dir.path().join("coordinator.log");
    // A low open-file limit that the process cannot raise: its pools are sized from it.
    let mut cmd = std::process::Command::new("prlimit");
    cmd.arg("--nofile=1024:1024")
        .arg(kairos_tests::bin("kairos-coordinator"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--insecure-loopback",
            "--allow-private",
            "127.0.0.0/8",
        ]);
    let (child, found) = spawn_command_until(
        cmd,
        "kairos-coordinator",
        &log,
        &[
            "kairos-coordinator listening on ",
            "kairos-coordinator metrics on ",
        ],
    );
    let c = Coordinator {
        child,
        url: format!("http://{}", found[0]),
        metrics: found[1].clone(),
        push: None,
    };
    let grpc = host_of(&c.url).to_string();

    // More silent connections than the process has descriptors, to both listeners, and
    // requests that stop half-way through their head.
    let flood_started = Instant::now();
    let silent_grpc = connect_many(&grpc, 1100);
    let silent_metrics = connect_many(&c.metrics, 300);
    let half_sent: Vec<TcpStream> = connect_many(&c.metrics, 20)
        .into_iter()
        .filter_map(|mut s| {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").ok()?;
            Some(s)
        })
        .collect();
    eprintln!(
        "opened {} gRPC, {} metrics and {} half-sent connections",
        silent_grpc.len(),
        silent_metrics.len(),
        half_sent.len()
    );

    // The probes' own pool is full now, but its silent holders are closed within the
    // first-byte limit (5 s), and /livez answers again.
    let waited = all_closed(&silent_metrics, Duration::from_secs(15))
        .unwrap_or_else(|open| panic!("{open} silent metrics connections still open after 15 s"));
    eprintln!("silent metrics connections closed after {waited:?}");
    let waited = all_closed(&half_sent, Duration::from_secs(15))
        .unwrap_or_else(|open| panic!("{open} half-sent requests still open after 15 s"));
    eprintln!("half-sent requests closed after {waited:?}");
    let livez_deadline = Instant::now() + Duration::from_secs(10);
    while http_status(&c.metrics, "/livez") != Some(200) {
        assert!(
            Instant::now() < livez_deadline,
            "/livez does not answer after the flood; see {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "/livez answers {:?} after the flood began",
        flood_started.elapsed()
    );

    // The gRPC flood: past the pool, closed at once; the rest within the first-byte limit
    // (10 s).
    let waited = all_closed(&silent_grpc, Duration::from_secs(25))
        .unwrap_or_else(|open| panic!("{open} silent gRPC connections still open after 25 s"));
    eprintln!("silent gRPC connections closed after {waited:?}");
    assert_grpc_answers(&c.url, "after the flood");

    let m = scrape(&c.metrics);
    for (metric, at_least) in [
        ("kairos_connections_shed_total{listener=\"grpc\"}", 100.0),
        ("kairos_connections_shed_total{listener=\"metrics\"}", 100.0),
        (
            "kairos_connections_timed_out_total{listener=\"grpc\",phase=\"first_byte\"}",
            100.0,
        ),
        (
            "kairos_connections_timed_out_total{listener=\"metrics\",phase=\"first_byte\"}",
            50.0,
        ),
    ] {
        let got = counter(&m, metric);
        assert!(got >= at_least, "{metric} = {got}, expected ≥ {at_least}");
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("connection limit reached"),
        "shedding is logged"
    );
}

#[test]
fn running_out_of_descriptors_is_survived_without_spinning() {
    let dir = TempDir::new("connections-emfile");
    let log = dir.path().join("coordinator.log");
    let c = start_coordinator(&[], &log);
    let pid = c.child.0.id();
    // Lower the running process's limit to just above what it holds: the next accepts fail
    // with EMFILE.
    let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let limit = held + 8;
    let status = std::process::Command::new("prlimit")
        .args([
            "--pid",
            &pid.to_string(),
            &format!("--nofile={limit}:{limit}"),
        ])
        .status()
        .unwrap();
    assert!(status.success(), "prlimit failed");
    let grpc = host_of(&c.url).to_string();
    // Fewer than the listen queue holds, so every connect completes.
    let mut flood = connect_many(&grpc, 100);
    assert_eq!(flood.len(), 100, "the listen queue takes the connections");
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(4));
    let used = cpu_seconds(pid) - before;
    eprintln!("{used:.2} CPU seconds in 4 s out of descriptors");
    assert!(
        used < 1.0,
        "the accept loop spins while out of descriptors: {used:.2} CPU s in 4 s"
    );

    // Free the descriptors: every listener recovers by itself.
    for s in &mut flood {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(20);
    let m = loop {
        if http_status(&c.metrics, "/livez") == Some(200) {
            if let Some(m) = try_scrape(&c.metrics) {
                break m;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the metrics listener did not recover; see {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let errors = counter(
        &m,
        "kairos_accept_errors_total{listener=\"grpc\",reason=\"descriptors\"}",
    );
    assert!(errors > 0.0, "accept errors are counted");
    assert_grpc_answers(&c.url, "again");
    // One warning for the episode, however many accepts failed, and its end.
    let deadline = Instant::now() + Duration::from_secs(30);
    let logged = loop {
        let logged = std::fs::read_to_string(&log).unwrap();
        if logged.contains("accepting connections again") || Instant::now() > deadline {
            break logged;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        logged.contains("accepting connections again"),
        "recovery is logged"
    );
    let warned = logged
        .lines()
        .filter(|l| l.contains("accepting connections failed") && l.contains("\"grpc\""))
        .count();
    assert_eq!(warned, 1, "accept errors are logged once per episode");
}

const FEEDS: usize = 2000;

/// Reads `stream` (snapshot parts, then deltas) until it assigns [`FEEDS`] feeds or
/// `within` passes; returns how many it assigns.
async fn assigned(stream: &mut tonic::Streaming<pb::AssignmentUpdate>, within: Duration) -> usize {
    use pb::assignment_update::Update;
    let mut feeds = std::collections::HashSet::new();
    let deadline = tokio::time::Instant::now() + within;
    while feeds.len() < FEEDS {
        let Ok(msg) = tokio::time::timeout_at(deadline, stream.message()).await else {
            break;
        };
        match msg.unwrap().expect("the stream goes on").update {
            Some(Update::Snapshot(s)) => feeds.extend(s.feeds.into_iter().map(|f| f.feed_id)),
            Some(Update::Delta(d)) => {
                feeds.extend(d.upserts.into_iter().map(|f| f.feed_id));
                for id in d.removed_feed_ids {
                    feeds.remove(&id);
                }
            }
            None => {}
        }
    }
    feeds.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_assignment_streams_of_a_session_are_superseded_not_kept() {
    let dir = TempDir::new("connections-streams");
    let c = start_coordinator(
        &["--replan-interval", "2s"],
        &dir.path().join("coordinator.log"),
    );
    let pid = c.child.0.id();
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    // Long URLs: the session's snapshot is about 8 MB.
    let pad = "p".repeat(3900);
    for i in 0..FEEDS {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("f{i}"),
                url: format!("http://127.0.0.1:9/{i}/{pad}"),
                weight: 0.0,
            })
            .await
            .unwrap();
    }
    let mut control = WorkerControlClient::connect(c.url.clone()).await.unwrap();
    let worker_id = control
        .register(pb::RegisterRequest {
            worker_name: "w".into(),
            capacity_fetches_per_second: 50.0,
            ingest_address: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let beat = {
        let (mut control, worker_id) = (control.clone(), worker_id.clone());
        tokio::spawn(async move {
            loop {
                let _ = control
                    .heartbeat(pb::HeartbeatRequest {
                        worker_id: worker_id.clone(),
                        ..Default::default()
                    })
                    .await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let request = || pb::AssignmentsRequest {
        worker_id: worker_id.clone(),
        applied_version: 0,
    };
    // A stream read until it holds every feed.
    let mut first = control.assignments(request()).await.unwrap().into_inner();
    let held_feeds = assigned(&mut first, Duration::from_secs(60)).await;
    assert_eq!(held_feeds, FEEDS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = rss_mib(pid);

    // Thirty streams of the same session on a connection whose receive window is zero:
    // nothing can be sent on them.
    let stuck = tonic::transport::Endpoint::from_shared(c.url.clone())
        .unwrap()
        .initial_stream_window_size(0)
        .connect()
        .await
        .unwrap();
    let mut stuck = WorkerControlClient::new(stuck);
    let mut held = Vec::new();
    for _ in 0..30 {
        held.push(stuck.assignments(request()).await.unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grown = rss_mib(pid) - rss_before;
    eprintln!("coordinator grew {grown:.0} MiB with 30 unread streams of an ~8 MB snapshot");
    // Measured on a 2-core machine: 36–105 MiB (one live stream, and snapshots built and
    // dropped); with every unread stream kept, 255–283 MiB.
    assert!(
        grown < 160.0,
        "unread assignment streams are kept: the coordinator grew {grown:.0} MiB"
    );
    // The first stream was superseded by the second.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match first.message().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the superseded stream ends");
    assert_eq!(
        ended.expect_err("ends with a status").code(),
        tonic::Code::Aborted
    );
    let m = scrape(&c.metrics);
    assert!(counter(&m, "kairos_assignment_streams_superseded_total") >= 30.0);

    // The session still works: a stream read normally gets the whole snapshot.
    let mut last = control.assignments(request()).await.unwrap().into_inner();
    assert_eq!(assigned(&mut last, Duration::from_secs(30)).await, FEEDS);
    beat.abort();
    drop(held);
}
