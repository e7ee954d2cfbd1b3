//! WebSub subscription requests (`Fetcher::hub_request`) against a small hub on loopback:
//! the form arrives as sent, a 307/308 is followed with the same form, other redirects and
//! refusals come back as errors with the hub's reason, and the address policy holds.

use kairos_worker::fetch::{FetchConfig, Fetcher};
use kairos_worker::target::TargetPolicy;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Requests the hub received: (path, body).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A hub answering by path: `/hub` and `/hub2` accept, `/moved` sends a 307 to `/hub2`,
/// `/perm` a 308 to `/hub`, `/found` a 302, `/loop` a 308 to itself, `/refuse` a 400.
async fn hub() -> (String, Seen) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut r = BufReader::new(stream);
                let mut line = String::new();
                r.read_line(&mut line).await.unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut length = 0usize;
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).await.unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                r.read_exact(&mut body).await.unwrap();
                log.lock()
                    .unwrap()
                    .push((path.clone(), String::from_utf8(body).unwrap()));
                let head = match path.as_str() {
                    "/hub" | "/hub2" => "202 Accepted\r\n".to_string(),
                    "/moved" => "307 Temporary Redirect\r\nlocation: /hub2\r\n".into(),
                    "/perm" => "308 Permanent Redirect\r\nlocation: /hub\r\n".into(),
                    "/found" => "302 Found\r\nlocation: /hub\r\n".into(),
                    "/loop" => "308 Permanent Redirect\r\nlocation: /loop\r\n".into(),
                    _ => "400 Bad Request\r\n".into(),
                };
                let text = if path == "/refuse" {
                    "topic not allowed"
                } else {
                    ""
                };
                let reply = format!(
                    "HTTP/1.1 {head}content-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = r.get_mut().write_all(reply.as_bytes()).await;
            });
        }
    });
    (base, seen)
}

fn fetcher() -> Fetcher {
    Fetcher::new(FetchConfig {
        connect_timeout: Duration::from_secs(2),
        total_timeout: Duration::from_secs(2),
        policy: TargetPolicy::allowing(vec!["127.0.0.0/8".parse().unwrap()]),
        ..FetchConfig::default()
    })
    .unwrap()
}

const FORM: &[(&str, &str)] = &[
    ("hub.mode", "subscribe"),
    ("hub.topic", "https://example.com/feed?a=1&b=2"),
    ("hub.callback", "https://kairos.example/websub/cb1"),
    ("hub.secret", "s3cret"),
    ("hub.lease_seconds", "864000"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_moved_and_refused() {
    let (base, seen) = hub().await;
    let f = fetcher();
    assert_eq!(f.hub_request(&format!("{base}/hub"), FORM).await, Ok(None));
    let (path, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(path, "/hub");
    let sent: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let want: Vec<(String, String)> = FORM
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(sent, want, "the form arrives whole, escaped and in order");
    // 307 and 308 are followed with the same form; the hub that accepted is reported.
    assert_eq!(
        f.hub_request(&format!("{base}/moved"), FORM).await,
        Ok(Some(format!("{base}/hub2")))
    );
    assert_eq!(
        f.hub_request(&format!("{base}/perm"), FORM).await,
        Ok(Some(format!("{base}/hub")))
    );
    {
        let seen = seen.lock().unwrap();
        let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["/hub", "/moved", "/hub2", "/perm", "/hub"]);
        assert!(
            seen.iter().all(|(_, b)| *b == seen[0].1),
            "same form each hop"
        );
    }
    // A refusal carries the hub's reason; a 302, a loop, a refused address are errors.
    let refused = f.hub_request(&format!("{base}/refuse"), FORM).await;
    assert_eq!(refused, Err("HTTP 400: topic not allowed".to_string()));
    assert!(f
        .hub_request(&format!("{base}/found"), FORM)
        .await
        .unwrap_err()
        .starts_with("HTTP 302"));
    assert_eq!(
        f.hub_request(&format!("{base}/loop"), FORM).await,
        Err("too many redirects".to_string())
    );
    let private = f.hub_request("http://10.1.2.3/hub", FORM).await;
    assert_eq!(
        private,
        Err("hub address 10.1.2.3 is not allowed".to_string())
    );
    assert!(f.hub_request("ftp://hub.example/", FORM).await.is_err());
}
