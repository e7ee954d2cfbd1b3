//! Fixed documents and misbehaving endpoints on loopback, for tests, benchmarks and
//! end-to-end runs: every way a feed server can go wrong that the fetcher must survive.
//!
//! Paths: `/feed` (RSS with an ETag; 304 on a match), `/throttle` (429 + Retry-After
//! seconds), `/unavailable` (503 + Retry-After date), `/missing` (404), `/broken` (500),
//! `/loop-a` ↔ `/loop-b` (redirect loop), `/hop/N` (endless redirect chain),
//! `/to-private` (redirect to 10.0.0.1), `/to-file` (redirect to a file URL), `/drip`
//! (one byte every 100 ms, forever), `/endless` (endless chunked body), `/bomb` (64 MiB of
//! zeros gzipped to ~64 KiB), `/s/NAME` (a file of the served directory, verbatim), and
//! documents built to hurt a reader ([`hostile_document`]): `/huge-titles` (8 items with
//! 1 MiB titles, markup and script links), `/many-items` (300,000 tiny items, 9 MB) and
//! `/unclosed-rdf` (80,000 RSS 1.0 items with no end tags).

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The document `/feed` serves.
pub const RSS: &str =
    "<rss version=\"2.0\"><channel><title>t</title><item><guid>1</guid></item></channel></rss>";

/// The document served at `path` among those built to hurt a reader, built once:
/// `/huge-titles`, `/many-items`, `/unclosed-rdf`.
pub fn hostile_document(path: &str) -> Option<&'static [u8]> {
    static DOCS: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    let docs = DOCS.get_or_init(|| {
        let mut huge = String::from("<rss version=\"2.0\"><channel><title>huge</title>");
        let links = [
            "javascript:alert(1)",
            "  JaVaScRiPt:alert(1)",
            "data:text/html,x",
            "vbscript:x",
            "https://example.org/ok",
        ];
        for i in 0..8 {
            huge.push_str(&format!(
                "<item><guid>h{i}</guid><link>{}</link><title>&lt;script&gt;alert({i})&lt;/script&gt;\u{7}{}</title></item>",
                links[i % links.len()],
                "t".repeat(1 << 20)
            ));
        }
        huge.push_str("</channel></rss>");
        let mut many = String::from("<rss version=\"2.0\"><channel><title>many</title>");
        for i in 0..300_000 {
            many.push_str(&format!("<item><guid>{i}</guid></item>"));
        }
        many.push_str("</channel></rss>");
        let mut rdf = String::from("<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" xmlns=\"http://purl.org/rss/1.0/\"><channel rdf:about=\"c\"><title>rdf</title></channel>");
        for i in 0..80_000 {
            rdf.push_str(&format!("<item rdf:about=\"http://example.org/{i}\">"));
        }
        rdf.push_str("</rdf:RDF>");
        [huge.into_bytes(), many.into_bytes(), rdf.into_bytes()]
    });
    match path {
        "/huge-titles" => Some(&docs[0]),
        "/many-items" => Some(&docs[1]),
        "/unclosed-rdf" => Some(&docs[2]),
        _ => None,
    }
}

/// 64 MiB of zeros, gzipped (about 64 KiB on the wire).
pub fn bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            enc.write_all(&zeros).expect("in-memory write");
        }
        enc.finish().expect("in-memory write")
    })
}

/// A loopback server whose behaviour depends on the request path; counts connections.
/// Stops when dropped.
pub struct Fixtures {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fixtures {
    /// Starts on `127.0.0.1` (ephemeral port); `/s/NAME` serves `dir/NAME` if a `dir` is given.
    pub async fn start(dir: Option<PathBuf>) -> std::io::Result<Fixtures> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let dir = Arc::new(dir);
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(handle(stream, port, dir.clone()));
            }
        });
        Ok(Fixtures {
            port,
            connections,
            task,
        })
    }

    /// URL of `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

async fn handle(mut s: TcpStream, port: u16, dir: Arc<Option<PathBuf>>) {
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
        "/moved" => reply("301 Moved Permanently", "Location: /moved-2\r\n", ""),
        "/moved-2" => reply("308 Permanent Redirect", "Location: feed\r\n", ""),
        "/moved-then-temp" => reply("301 Moved Permanently", "Location: /temp\r\n", ""),
        "/temp" => reply("302 Found", "Location: /feed\r\n", ""),
        "/gone" => reply("410 Gone", "", ""),
        "/old-home" => reply("308 Permanent Redirect", "Location: /new-home\r\n", ""),
        "/new-home" => reply("200 OK", "Content-Type: application/rss+xml\r\n", RSS),
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
        p if hostile_document(p).is_some() => {
            let body = hostile_document(p).expect("matched");
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(body).await;
            return;
        }
        p if p.starts_with("/s/") => {
            // A fixed document, served as bytes (no Content-Type guessing).
            // Percent-decoded relative path; no empty, `.` or `..` component escapes.
            let name = percent_decode(&p[3..]);
            let safe = name
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..");
            let file = (*dir)
                .as_ref()
                .filter(|_| safe)
                .map(|d| d.join(&name));
            match file.and_then(|f| std::fs::read(f).ok()) {
                Some(bytes) => {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        bytes.len()
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    let _ = s.write_all(&bytes).await;
                    return;
                }
                None => reply("404 Not Found", "", ""),
            }
        }
        _ => reply("404 Not Found", "", ""),
    };
    let _ = s.write_all(text.as_bytes()).await;
}

/// Decodes `%XX` escapes (invalid escapes stay as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
