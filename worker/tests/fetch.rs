//! The fetcher against misbehaving HTTP servers on loopback: every fetch ends, in bounded
//! time, with the right classification.

use kairos_farm::fixtures::{Fixtures, RSS};
use kairos_worker::fetch::{FetchConfig, Fetcher, Outcome, Validators};
use kairos_worker::target::TargetPolicy;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn loopback_config() -> FetchConfig {
    FetchConfig {
        connect_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(2),
        max_body_bytes: 1 << 20,
        policy: TargetPolicy::allowing(vec!["127.0.0.0/8".parse().unwrap()]),
        ..FetchConfig::default()
    }
}

fn fetcher() -> Fetcher {
    Fetcher::new(loopback_config()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_then_conditional_get_not_modified() {
    let srv = Fixtures::start(None).await.unwrap();
    let f = fetcher();
    let first = f.fetch(&srv.url("/feed"), &Validators::default()).await;
    assert_eq!(
        first.outcome,
        Outcome::Ok {
            status: 200,
            body: RSS.as_bytes().to_vec()
        }
    );
    assert_eq!(first.validators.etag.as_deref(), Some("\"v1\""));
    assert_eq!(first.max_age, Some(Duration::from_secs(600)));
    assert_eq!(first.body_bytes, RSS.len() as u64);
    let second = f.fetch(&srv.url("/feed"), &first.validators).await;
    assert_eq!(second.outcome, Outcome::NotModified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_and_errors_are_classified() {
    let srv = Fixtures::start(None).await.unwrap();
    let f = fetcher();
    let t = f.fetch(&srv.url("/throttle"), &Validators::default()).await;
    assert_eq!(
        t.outcome,
        Outcome::Throttled {
            status: 429,
            retry_after: Some(Duration::from_secs(120))
        }
    );
    match f
        .fetch(&srv.url("/unavailable"), &Validators::default())
        .await
        .outcome
    {
        Outcome::Throttled {
            status: 503,
            retry_after: Some(d),
        } => {
            assert!(
                d > Duration::from_secs(50) && d <= Duration::from_secs(60),
                "{d:?}"
            )
        }
        other => panic!("expected 503 with an HTTP-date Retry-After, got {other:?}"),
    }
    assert_eq!(
        f.fetch(&srv.url("/missing"), &Validators::default())
            .await
            .outcome,
        Outcome::ClientError { status: 404 }
    );
    assert_eq!(
        f.fetch(&srv.url("/broken"), &Validators::default())
            .await
            .outcome,
        Outcome::ServerError { status: 500 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_drip_endless_body_and_gzip_bomb_end_bounded() {
    let srv = Fixtures::start(None).await.unwrap();
    let f = fetcher();
    let drip = f.fetch(&srv.url("/drip"), &Validators::default()).await;
    assert_eq!(drip.outcome, Outcome::Timeout);
    assert!(
        drip.elapsed < Duration::from_secs(5),
        "drip took {:?}",
        drip.elapsed
    );
    let endless = f.fetch(&srv.url("/endless"), &Validators::default()).await;
    assert_eq!(endless.outcome, Outcome::TooLarge);
    assert!(
        endless.elapsed < Duration::from_secs(5),
        "endless took {:?}",
        endless.elapsed
    );
    let bomb = f.fetch(&srv.url("/bomb"), &Validators::default()).await;
    assert_eq!(
        bomb.outcome,
        Outcome::TooLarge,
        "64 MiB after decompression against a 1 MiB limit"
    );
    assert!(
        bomb.body_bytes > 1 << 20 && bomb.body_bytes < 4 << 20,
        "stopped near the limit: {}",
        bomb.body_bytes
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_loops_chains_and_bad_targets() {
    let srv = Fixtures::start(None).await.unwrap();
    let f = fetcher();
    assert_eq!(
        f.fetch(&srv.url("/loop-a"), &Validators::default())
            .await
            .outcome,
        Outcome::RedirectLimit
    );
    assert_eq!(
        f.fetch(&srv.url("/hop/0"), &Validators::default())
            .await
            .outcome,
        Outcome::RedirectLimit
    );
    // A redirect into a private range is refused before any connection to it.
    assert!(matches!(
        f.fetch(&srv.url("/to-private"), &Validators::default())
            .await
            .outcome,
        Outcome::ForbiddenTarget(_)
    ));
    let to_file = f
        .fetch(&srv.url("/to-file"), &Validators::default())
        .await
        .outcome;
    assert!(matches!(to_file, Outcome::BadUrl(_)), "{to_file:?}");
    assert!(matches!(
        f.fetch("ftp://127.0.0.1/feed", &Validators::default())
            .await
            .outcome,
        Outcome::BadUrl(_)
    ));
    assert!(matches!(
        f.fetch("not a url", &Validators::default()).await.outcome,
        Outcome::BadUrl(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_redirects_are_told_from_temporary_ones() {
    let srv = Fixtures::start(None).await.unwrap();
    let f = fetcher();
    // 301 then 308 (relative Location): the feed moved.
    let moved = f.fetch(&srv.url("/moved"), &Validators::default()).await;
    assert!(
        matches!(moved.outcome, Outcome::Ok { .. }),
        "{:?}",
        moved.outcome
    );
    assert_eq!(moved.final_url, srv.url("/feed"));
    assert!(moved.permanent_redirect);
    // One temporary hop on the way: not a move.
    let temp = f
        .fetch(&srv.url("/moved-then-temp"), &Validators::default())
        .await;
    assert!(matches!(temp.outcome, Outcome::Ok { .. }));
    assert_eq!(temp.final_url, srv.url("/feed"));
    assert!(!temp.permanent_redirect);
    // No redirect at all.
    let direct = f.fetch(&srv.url("/feed"), &Validators::default()).await;
    assert!(!direct.permanent_redirect);
    assert_eq!(
        f.fetch(&srv.url("/gone"), &Validators::default())
            .await
            .outcome,
        Outcome::ClientError { status: 410 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_targets_are_refused_without_the_allow_list() {
    let srv = Fixtures::start(None).await.unwrap();
    let strict = Fetcher::new(FetchConfig {
        total_timeout: Duration::from_secs(2),
        ..FetchConfig::default()
    })
    .unwrap();
    let literal = strict
        .fetch(&srv.url("/feed"), &Validators::default())
        .await;
    assert!(
        matches!(literal.outcome, Outcome::ForbiddenTarget(_)),
        "{:?}",
        literal.outcome
    );
    // A name that resolves to loopback is refused at resolution time.
    let named = strict
        .fetch(
            &format!("http://localhost:{}/feed", srv.port),
            &Validators::default(),
        )
        .await;
    assert!(
        matches!(named.outcome, Outcome::ForbiddenTarget(_)),
        "{:?}",
        named.outcome
    );
    assert_eq!(
        srv.connections.load(Ordering::SeqCst),
        0,
        "no connection was made"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connections_are_network_errors() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = fetcher()
        .fetch(
            &format!("http://127.0.0.1:{port}/feed"),
            &Validators::default(),
        )
        .await;
    assert!(
        matches!(out.outcome, Outcome::Network(_)),
        "{:?}",
        out.outcome
    );
}

/// A fetch by host name resolves it (timed) and opens a connection (timed): the fixture
/// closes each connection after its answer, so both fetches do both.
#[test]
fn dns_and_connection_times_are_recorded() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let srv = Fixtures::start(None).await.unwrap();
            let url = srv.url("/feed").replace("127.0.0.1", "localhost");
            let f = fetcher();
            for _ in 0..2 {
                let got = f.fetch(&url, &Validators::default()).await;
                assert!(
                    matches!(got.outcome, Outcome::Ok { .. }),
                    "{:?}",
                    got.outcome
                );
            }
        })
    });
    let text = handle.render();
    let count = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} missing in:\n{text}"))
    };
    assert_eq!(count("kairos_worker_dns_seconds_count{result=\"ok\"}"), 2.0);
    assert_eq!(
        count("kairos_worker_connect_seconds_count{result=\"ok\"}"),
        2.0
    );
}
