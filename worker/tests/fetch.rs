//! The fetcher against misbehaving HTTP servers on loopback: every fetch ends, in bounded
//! time, with the right classification.

use kairos_worker::fetch::{FetchConfig, Fetcher, Outcome, Validators};
use kairos_worker::target::TargetPolicy;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RSS: &str =
    "<rss version=\"2.0\"><channel><title>t</title><item><guid>1</guid></item></channel></rss>";

/// 64 MiB of zeros, gzipped (about 64 KiB on the wire).
fn bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        enc.finish().unwrap()
    })
}

/// A loopback server whose behaviour depends on the request path; counts connections.
struct Server {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Server {
    async fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(handle(stream, port));
            }
        });
        Server { port, connections }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

async fn handle(mut s: TcpStream, port: u16) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let req = String::from_utf8_lossy(&buf).to_string();
    let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
    let reply = |status: &str, headers: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
            body.len()
        )
    };
    let text = match path.as_str() {
        "/feed" if req.to_ascii_lowercase().contains("if-none-match: \"v1\"") => reply("304 Not Modified", "ETag: \"v1\"\r\n", ""),
        "/feed" => reply("200 OK", "ETag: \"v1\"\r\nCache-Control: public, max-age=600\r\nContent-Type: application/rss+xml\r\n", RSS),
        "/throttle" => reply("429 Too Many Requests", "Retry-After: 120\r\n", ""),
        "/unavailable" => {
            let when = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(60));
            reply("503 Service Unavailable", &format!("Retry-After: {when}\r\n"), "")
        }
        "/missing" => reply("404 Not Found", "", "no"),
        "/broken" => reply("500 Internal Server Error", "", "oops"),
        "/loop-a" => reply("302 Found", "Location: /loop-b\r\n", ""),
        "/loop-b" => reply("302 Found", "Location: /loop-a\r\n", ""),
        "/to-private" => reply("302 Found", "Location: http://10.0.0.1/feed\r\n", ""),
        "/to-file" => reply("302 Found", "Location: file:///etc/passwd\r\n", ""),
        p if p.starts_with("/hop/") => {
            let n: u32 = p[5..].parse().unwrap_or(0);
            reply("302 Found", &format!("Location: http://127.0.0.1:{port}/hop/{}\r\n", n + 1), "")
        }
        "/drip" => {
            // Headers promise a body that then arrives one byte at a time, forever.
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n").await;
            while s.write_all(b"x").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            return;
        }
        "/endless" => {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await;
            let block = vec![b'a'; 65536];
            let mut frame = format!("{:x}\r\n", block.len()).into_bytes();
            frame.extend_from_slice(&block);
            frame.extend_from_slice(b"\r\n");
            while s.write_all(&frame).await.is_ok() {}
            return;
        }
        "/bomb" => {
            let body = bomb();
            let head = format!("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body).await;
            return;
        }
        _ => reply("404 Not Found", "", ""),
    };
    let _ = s.write_all(text.as_bytes()).await;
}

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
    let srv = Server::start().await;
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
    let srv = Server::start().await;
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
    let srv = Server::start().await;
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
    let srv = Server::start().await;
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
async fn private_targets_are_refused_without_the_allow_list() {
    let srv = Server::start().await;
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
