//! Forward proxies and the address guard. A proxy resolves target names itself, past the
//! fetcher's DNS guard, so the environment's proxy variables are ignored, and with `--proxy`
//! the target is checked before the request goes to the proxy. Its own test binary: it sets
//! the proxy variables for the whole process.

use kairos_worker::fetch::{FetchConfig, Fetcher, Outcome, Validators};
use kairos_worker::target::TargetPolicy;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback "proxy" answering every request with `200 ok`; counts connections.
async fn fake_proxy() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (url, seen)
}

fn fetcher(proxy: Option<&str>, allow_loopback: bool) -> Fetcher {
    let allow = if allow_loopback {
        vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()]
    } else {
        Vec::new()
    };
    Fetcher::new(FetchConfig {
        policy: TargetPolicy::allowing(allow),
        proxy: proxy.map(str::to_string),
        ..FetchConfig::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_never_carry_a_fetch_past_the_address_guard() {
    let (proxy, seen) = fake_proxy().await;
    for var in [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
    ] {
        std::env::set_var(var, &proxy);
    }
    let target = "http://localhost:9/feed";

    // The environment's proxy is ignored: the guard refuses loopback, nothing is proxied.
    let got = fetcher(None, false)
        .fetch(target, &Validators::default())
        .await;
    assert!(
        matches!(got.outcome, Outcome::ForbiddenTarget(_)),
        "{:?}",
        got.outcome
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "the environment's proxy was used"
    );

    // With --proxy, the target is checked first: refused, and the proxy never sees it.
    let got = fetcher(Some(&proxy), false)
        .fetch(target, &Validators::default())
        .await;
    assert!(
        matches!(got.outcome, Outcome::ForbiddenTarget(_)),
        "{:?}",
        got.outcome
    );
    assert_eq!(seen.load(Ordering::SeqCst), 0);

    // A permitted target does go through the configured proxy.
    let got = fetcher(Some(&proxy), true)
        .fetch(target, &Validators::default())
        .await;
    assert_eq!(
        got.outcome,
        Outcome::Ok {
            status: 200,
            body: b"ok".to_vec()
        }
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}
