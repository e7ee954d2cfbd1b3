//! A TCP proxy on loopback between a coordinator and etcd, to cut or slow that one link
//! while everything else goes on. Cut, it neither delivers nor refuses: bytes already sent
//! and connections opened meanwhile wait, as they would behind a network partition, and
//! are delivered in order once it heals. Slow, it holds each chunk for a set delay in each
//! direction, as an etcd that answers in seconds rather than not at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PASS: u64 = 0;
const CUT: u64 = u64::MAX;

/// A running proxy; it stops with the test's runtime.
#[derive(Clone)]
pub struct Proxy {
    /// Where clients connect.
    pub addr: String,
    mode: Arc<AtomicU64>,
}

impl Proxy {
    /// A proxy to `target` (host:port) on a free loopback port.
    pub async fn start(target: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mode = Arc::new(AtomicU64::new(PASS));
        let (target, m) = (target.to_string(), mode.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (target, m) = (target.clone(), m.clone());
                tokio::spawn(async move {
                    // A connection opened while cut waits to reach the other side.
                    while m.load(Ordering::Relaxed) == CUT {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let Ok(server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pump(cr, sw, m.clone()));
                    tokio::spawn(pump(sr, cw, m));
                });
            }
        });
        Proxy { addr, mode }
    }

    /// Nothing passes until [`Proxy::heal`].
    pub fn cut(&self) {
        self.mode.store(CUT, Ordering::Relaxed);
    }

    /// Every chunk waits `delay` in each direction.
    pub fn slow(&self, delay: Duration) {
        self.mode.store(
            (delay.as_millis() as u64).clamp(1, CUT - 1),
            Ordering::Relaxed,
        );
    }

    /// Back to passing everything at once (what was held goes first).
    pub fn heal(&self) {
        self.mode.store(PASS, Ordering::Relaxed);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match mode.load(Ordering::Relaxed) {
                PASS => break,
                CUT => tokio::time::sleep(Duration::from_millis(20)).await,
                ms => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    break;
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
