//! Accepting connections under limits, for every listener both binaries open (gRPC, the
//! worker's ingest endpoint, `/metrics` and the probes).
//!
//! A stranger can open connections and say nothing, or stop reading, and the process's
//! descriptors are finite. So:
//!
//! * **Pools.** Each class of listener draws from its own pool of connections, sized from
//!   the open-file limit ([`raise_open_file_limit`] lifts the soft limit to the hard one at
//!   start): the gRPC listeners share one, `/metrics` and the probes have their own, so a
//!   flood of one never takes the other's slots (a kubelet probing `/livez` must not
//!   restart a healthy process because its gRPC port is flooded). A connection past its
//!   pool is accepted and closed at once (counted, logged once per episode), so the
//!   caller learns at once instead of waiting in a full backlog.
//! * **Silence.** A connection must send its first byte within [`Limits::first_byte`], and
//!   is closed after [`Limits::idle`] without a byte moving either way (a writer the peer
//!   does not read from counts as idle too). gRPC servers add HTTP/2 pings, which live
//!   peers answer, so a quiet but healthy stream is never idle.
//! * **Accept errors** (out of descriptors, `EMFILE`/`ENFILE`, and the like) no longer end or
//!   spin the loop: it backs off from 10 ms to 1 s, logs the first error of an episode and
//!   the recovery, counts every one, and goes on accepting when descriptors free up.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Counter `listener`, `reason` (`descriptors`: the process's or the system's open-file
/// limit; `memory`; `other`): accept calls that failed.
pub const ACCEPT_ERRORS_TOTAL: &str = "kairos_accept_errors_total";
/// Counter `listener`: connections closed at once because the listener's pool was full.
pub const CONNECTIONS_SHED_TOTAL: &str = "kairos_connections_shed_total";
/// Counter `listener`, `phase` (`first_byte`, `idle`): connections closed for silence.
pub const CONNECTIONS_TIMED_OUT_TOTAL: &str = "kairos_connections_timed_out_total";
/// Gauge `listener`: connections open now.
pub const CONNECTIONS_OPEN: &str = "kairos_connections_open";

/// Describes this module's metrics (after the recorder is installed).
pub fn describe() {
    metrics::describe_counter!(
        ACCEPT_ERRORS_TOTAL,
        "Accept calls that failed, by listener and reason; the loop backs off and goes on."
    );
    metrics::describe_counter!(
        CONNECTIONS_SHED_TOTAL,
        "Connections closed at once because their listener's pool was full."
    );
    metrics::describe_counter!(
        CONNECTIONS_TIMED_OUT_TOTAL,
        "Connections closed for silence: never spoke (first_byte) or went quiet (idle)."
    );
    metrics::describe_gauge!(CONNECTIONS_OPEN, "Connections open, by listener.");
}

/// Descriptors kept out of every pool: store files, the etcd client, outgoing fetches'
/// floor, logs.
const RESERVED_FDS: u64 = 128;

/// Raises the soft open-file limit to the hard one (where the platform allows) and returns
/// the limit in force. Call it once at start, before any listener is opened: the pools are
/// sized from it.
pub fn raise_open_file_limit() -> u64 {
    let (soft, hard) = match nofile() {
        Some(l) => l,
        None => return 1024,
    };
    let mut now = soft;
    if hard > soft {
        let wanted = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads the struct we pass and nothing else.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } == 0 {
            now = hard;
            tracing::info!(from = soft, to = hard, "open-file limit raised");
        } else {
            tracing::warn!(soft, hard, error = %io::Error::last_os_error(), "could not raise the open-file limit");
        }
    }
    if now < 4096 {
        tracing::warn!(
            limit = now,
            "the open-file limit is low: connections past each listener's share are closed at once"
        );
    }
    now
}

fn nofile() -> Option<(u64, u64)> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    Some((l.rlim_cur, l.rlim_max))
}

/// Which pool a listener draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// gRPC: the coordinator's main, admin and public ports, the worker's ingest port.
    Grpc,
    /// `/metrics`, `/livez`, `/readyz`.
    Probes,
}

/// A pool of connection slots.
#[derive(Clone, Debug)]
pub struct Pool {
    permits: Arc<Semaphore>,
    size: usize,
}

impl Pool {
    /// A pool of `size` slots.
    pub fn new(size: usize) -> Pool {
        Pool {
            permits: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// How many connections it holds at most.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The process's pool for `class`: gRPC listeners share half of the descriptors
    /// (past `RESERVED_FDS`), the probes a tenth; the rest stays for outgoing
    /// connections and files.
    pub fn of(class: Class) -> Pool {
        static POOLS: OnceLock<(Pool, Pool)> = OnceLock::new();
        let (grpc, probes) = POOLS.get_or_init(|| {
            let fds = nofile().map(|l| l.0).unwrap_or(1024);
            let spare = fds.saturating_sub(RESERVED_FDS).min(1 << 20) as usize;
            (
                Pool::new((spare / 2).clamp(32, 65_536)),
                Pool::new((spare / 10).clamp(16, 1_024)),
            )
        });
        match class {
            Class::Grpc => grpc.clone(),
            Class::Probes => probes.clone(),
        }
    }
}

/// How long a connection may stay silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From accept to the peer's first byte (the TLS handshake or HTTP/2 preface included).
    pub first_byte: Duration,
    /// Without a byte moving either way, once the peer has spoken.
    pub idle: Duration,
}

impl Limits {
    /// gRPC listeners: HTTP/2 pings every [`GRPC_KEEPALIVE`] keep live peers busy, so two
    /// missed rounds and more is silence.
    pub const GRPC: Limits = Limits {
        first_byte: Duration::from_secs(10),
        idle: Duration::from_secs(90),
    };
    /// `/metrics` and the probes: a scrape is one short request.
    pub const PROBES: Limits = Limits {
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(30),
    };
}

/// The HTTP/2 ping interval of gRPC servers (answered within [`GRPC_KEEPALIVE_TIMEOUT`],
/// or the connection is closed).
pub const GRPC_KEEPALIVE: Duration = Duration::from_secs(30);
/// How long a gRPC server waits for a ping's answer.
pub const GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// HTTP/2 streams one gRPC connection may have open at once: a worker needs three or four
/// (assignments, reports, heartbeats), a client a few.
pub const GRPC_MAX_STREAMS: u32 = 64;

/// Accepted connections of `listener` (named `name` in logs and metrics), each holding a
/// slot of `pool` while open and closed when silent past `limits`. The stream never yields
/// an error: accept errors are handled here (see the module's notes). It ends when dropped.
pub fn accept(listener: TcpListener, name: &'static str, pool: Pool, limits: Limits) -> Accepted {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(accept_loop(listener, name, pool, limits, tx));
    Accepted(rx)
}

async fn accept_loop(
    listener: TcpListener,
    name: &'static str,
    pool: Pool,
    limits: Limits,
    tx: mpsc::Sender<io::Result<Guarded<TcpStream>>>,
) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(10);
    // An episode of accept errors ends after this long without one: a process at its
    // descriptor limit frees one now and then and fails again at once, which is one
    // episode, not a warning a second.
    const EPISODE_QUIET: Duration = Duration::from_secs(10);
    let mut backoff = FIRST_BACKOFF;
    let mut failing: Option<(u64, Instant)> = None;
    let mut shed = 0u64;
    loop {
        let quiet = async {
            match failing {
                Some((_, last)) => tokio::time::sleep_until(last + EPISODE_QUIET).await,
                None => std::future::pending().await,
            }
        };
        let accepted = tokio::select! {
            _ = tx.closed() => return,
            a = listener.accept() => a,
            _ = quiet => {
                if let Some((failed, _)) = failing.take() {
                    tracing::info!(listener = name, failed, "accepting connections again");
                }
                continue;
            }
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                backoff = FIRST_BACKOFF;
                tcp
            }
            Err(e) => {
                metrics::counter!(ACCEPT_ERRORS_TOTAL, "listener" => name, "reason" => accept_error_reason(&e)).increment(1);
                let failed = match failing {
                    Some((n, _)) => n + 1,
                    None => {
                        tracing::warn!(listener = name, error = %e, "accepting connections failed; backing off until it works again");
                        1
                    }
                };
                failing = Some((failed, Instant::now()));
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Ok(permit) = pool.permits.clone().try_acquire_owned() else {
            metrics::counter!(CONNECTIONS_SHED_TOTAL, "listener" => name).increment(1);
            if shed == 0 {
                tracing::warn!(
                    listener = name,
                    open = pool.size,
                    "connection limit reached; closing new connections until some end"
                );
            }
            shed += 1;
            drop(tcp);
            continue;
        };
        if shed > 0 {
            tracing::info!(
                listener = name,
                closed = shed,
                "below the connection limit again"
            );
            shed = 0;
        }
        let _ = tcp.set_nodelay(true);
        if tx
            .send(Ok(Guarded::new(tcp, name, permit, limits)))
            .await
            .is_err()
        {
            return;
        }
    }
}

fn accept_error_reason(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE) => "descriptors",
        Some(libc::ENOBUFS | libc::ENOMEM) => "memory",
        _ => "other",
    }
}

/// Accepted connections, as a `Stream` for `serve_with_incoming`.
pub struct Accepted(mpsc::Receiver<io::Result<Guarded<TcpStream>>>);

impl Accepted {
    /// The next connection; `None` once the accept loop has stopped.
    pub async fn next(&mut self) -> Option<Guarded<TcpStream>> {
        self.0.recv().await?.ok()
    }
}

impl tokio_stream::Stream for Accepted {
    type Item = io::Result<Guarded<TcpStream>>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// A connection that holds a pool slot while open and fails its reads and writes once
/// silent past its [`Limits`].
pub struct Guarded<IO> {
    io: IO,
    name: &'static str,
    limits: Limits,
    opened: Instant,
    last: Instant,
    heard: bool,
    timer: Pin<Box<Sleep>>,
    _slot: OwnedSemaphorePermit,
}

impl<IO> Guarded<IO> {
    fn new(io: IO, name: &'static str, slot: OwnedSemaphorePermit, limits: Limits) -> Self {
        metrics::gauge!(CONNECTIONS_OPEN, "listener" => name).increment(1.0);
        let now = Instant::now();
        Guarded {
            io,
            name,
            limits,
            opened: now,
            last: now,
            heard: false,
            timer: Box::pin(tokio::time::sleep_until(now + limits.first_byte)),
            _slot: slot,
        }
    }

    /// The connection underneath.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// On a poll that could not move a byte: the error that ends a silent connection, once
    /// its deadline has passed (the timer wakes this task then).
    fn silent(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let deadline = if self.heard {
            self.last + self.limits.idle
        } else {
            self.opened + self.limits.first_byte
        };
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        if self.timer.as_mut().poll(cx).is_pending() {
            return None;
        }
        let phase = if self.heard { "idle" } else { "first_byte" };
        metrics::counter!(CONNECTIONS_TIMED_OUT_TOTAL, "listener" => self.name, "phase" => phase)
            .increment(1);
        tracing::debug!(listener = self.name, phase, "closing a silent connection");
        Some(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("connection silent past its {phase} limit"),
        ))
    }
}

impl<IO> Guarded<IO> {
    /// A write's outcome: progress keeps a conversation alive; a stalled write (the peer
    /// reads nothing) is silence.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(Ok(n)) => {
                if n > 0 && self.heard {
                    self.last = Instant::now();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.silent(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<IO> Drop for Guarded<IO> {
    fn drop(&mut self) {
        metrics::gauge!(CONNECTIONS_OPEN, "listener" => self.name).decrement(1.0);
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Guarded<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    self.heard = true;
                    self.last = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match self.silent(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Guarded<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for Guarded<IO> {
    type ConnectInfo = IO::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// A gRPC server builder under this module's limits: HTTP/2 pings every
/// [`GRPC_KEEPALIVE`] (a peer that does not answer within [`GRPC_KEEPALIVE_TIMEOUT`] is
/// dropped) and at most [`GRPC_MAX_STREAMS`] streams per connection.
pub fn grpc_server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(GRPC_KEEPALIVE))
        .http2_keepalive_timeout(Some(GRPC_KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(GRPC_MAX_STREAMS)
}

/// [`accept`] for a gRPC listener: the process's gRPC pool and [`Limits::GRPC`].
pub fn accept_grpc(listener: TcpListener, name: &'static str) -> Accepted {
    accept(listener, name, Pool::of(Class::Grpc), Limits::GRPC)
}
