//! The etcd backend: every key under one namespace prefix (`--etcd-prefix`, so clusters
//! can share an etcd), revisions are etcd's own `mod_revision`, comparisons are etcd
//! transaction compares.
//!
//! **Batches larger than one etcd transaction** (etcd refuses more than `--max-txn-ops`,
//! 128 by default, and requests over `--max-request-bytes`, 1.5 MiB): an OPML import or a
//! burst of reports can be thousands of writes. Such a batch is written as a redo journal
//! first — its operations in chunks under `journal/ID/N`, then the `journal/ID/commit`
//! marker, which is the moment the batch counts as written — then applied chunk by chunk
//! and the journal deleted. A process that dies in between leaves the journal, and the next
//! [`EtcdBackend::connect`] applies a committed one again (puts and deletes are idempotent)
//! or drops an uncommitted one, so a batch lands whole or not at all. Readers may see a
//! batch half-applied while it is being applied; every caller tolerates that (each record
//! is complete on its own). A conditional [`KvBackend::txn`] must fit one transaction and
//! is refused otherwise.

use super::keys::Key;
use super::{Compare, KvBackend, Op, Pairs, StoreError, StoreFuture};
use etcd_client::{
    Client, Compare as EtcdCompare, CompareOp, ConnectOptions, GetOptions, KvClient, Txn, TxnOp,
    TxnOpResponse,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Whether a failed request never reached etcd (a refused or failed connection).
fn never_sent(e: &etcd_client::Error) -> bool {
    let text = e.to_string();
    text.contains("connect error") || text.contains("Connection refused")
}

/// Where the redo journal of large batches lives (under the namespace prefix).
const JOURNAL: &[u8] = b"journal/";

/// How to reach etcd.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    /// `host:port` or `http(s)://host:port` of each member.
    pub endpoints: Vec<String>,
    /// Prefix of every key Kairos writes (e.g. `/kairos/`).
    pub prefix: String,
    /// How long to keep trying to reach etcd at start before giving up.
    pub connect_timeout: Duration,
    /// Deadline of each request.
    pub request_timeout: Duration,
    /// CA that etcd's server certificate chains to, and the client certificate and key
    /// to present (PEM paths); TLS is used when the CA is given.
    pub tls: Option<EtcdTls>,
    /// Operations per transaction etcd accepts (its `--max-txn-ops`).
    pub max_txn_ops: usize,
    /// Bytes of keys and values per transaction we send (below etcd's
    /// `--max-request-bytes`, leaving room for framing).
    pub max_txn_bytes: usize,
    /// Keys left in a kind past which its pages are read in segments (etcd counts every
    /// key of a range it reads, whatever the limit: [`KvBackend::range`]).
    pub big_range: i64,
}

/// TLS to etcd.
#[derive(Clone, Debug)]
pub struct EtcdTls {
    /// CA certificate (PEM) etcd's certificate must chain to.
    pub ca: std::path::PathBuf,
    /// Client certificate and key (PEM), when etcd requires client certificates.
    pub identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            endpoints: vec!["127.0.0.1:2379".into()],
            prefix: "/kairos/".into(),
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
            tls: None,
            max_txn_ops: 128,
            max_txn_bytes: 1 << 20,
            big_range: BIG_RANGE,
        }
    }
}

/// A connection to one member. The client's own balancing over several endpoints kept
/// sending requests to a killed member (it fails fast, so it looks least loaded), so the
/// backend talks to one member at a time and moves to the next when it cannot reach it.
#[derive(Clone)]
struct Conn {
    client: Client,
    kv: KvClient,
    member: usize,
}

/// Connects to the member at `url` (lazily, or at once, as the client chooses).
async fn open_member(url: &str, opts: &ConnectOptions) -> Result<Conn, etcd_client::Error> {
    let client = Client::connect([url], Some(opts.clone())).await?;
    let kv = client.kv_client().max_decoding_message_size(64 << 20);
    Ok(Conn {
        client,
        kv,
        member: 0,
    })
}

/// Whether etcd refused a request for lack of space: its quota is reached and the NOSPACE
/// alarm raised ("etcdserver: mvcc: database space exceeded"); it then takes reads and
/// deletes only, until the alarm is disarmed.
fn is_out_of_space(e: &etcd_client::Error) -> bool {
    e.to_string().contains("database space exceeded")
}

/// A leader key and the creation revision it must still have.
type Fence = (Vec<u8>, i64);

/// A store in etcd.
#[derive(Clone)]
pub struct EtcdBackend {
    /// The member requests go to; another is taken when it cannot be reached.
    conn: Arc<std::sync::RwLock<Conn>>,
    /// Every member's URL, and how to connect.
    urls: Arc<Vec<String>>,
    opts: ConnectOptions,
    prefix: Vec<u8>,
    endpoints: String,
    max_ops: usize,
    max_bytes: usize,
    writable: Arc<AtomicBool>,
    /// Whether the last failed write was refused for space (etcd's NOSPACE alarm), until a
    /// write goes through again.
    out_of_space: Arc<AtomicBool>,
    /// The revision seen at the last [`KvBackend::compact`]: the next one compacts up to it,
    /// so one interval of history always stays.
    seen: Arc<std::sync::Mutex<Option<i64>>>,
    /// Once set, every write is conditioned on this leader key still having this creation
    /// revision: a coordinator that lost its leadership cannot write after its successor
    /// was elected, whatever it believes.
    fence: Arc<std::sync::RwLock<Option<Fence>>>,
    /// Turns true when a fenced write found the leader key gone or re-created.
    deposed: Arc<tokio::sync::watch::Sender<bool>>,
    /// Prefixes a read to their end found more than `big_range` keys left in: their later
    /// pages are read in segments ([`KvBackend::range`]).
    big: Arc<std::sync::Mutex<std::collections::HashSet<Vec<u8>>>>,
    big_range: i64,
}

/// Keys left in a kind past which its pages are read in segments, by default.
pub const BIG_RANGE: i64 = 20_000;

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("endpoints", &self.endpoints)
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish()
    }
}

fn op_bytes(op: &Op) -> usize {
    match op {
        Op::Put(k, v) => k.len() + v.len() + 16,
        Op::Delete(k) => k.len() + 16,
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0] // etcd: "to the end of the keyspace"
}

/// `endpoint` as a URL: a bare `host:port` gets the scheme TLS implies; a scheme that
/// contradicts the TLS setting is refused (never plaintext where TLS was meant).
fn endpoint_url(endpoint: &str, tls: bool) -> Result<String, StoreError> {
    match (endpoint.split_once("://").map(|(s, _)| s), tls) {
        (None, true) => Ok(format!("https://{endpoint}")),
        (None, false) => Ok(format!("http://{endpoint}")),
        (Some("https"), true) | (Some("http"), false) => Ok(endpoint.to_string()),
        (Some("https"), false) => Err(StoreError(format!(
            "etcd endpoint {endpoint} is https but no --etcd-ca is given"
        ))),
        (Some("http"), true) => Err(StoreError(format!(
            "TLS to etcd is configured (--etcd-ca) but endpoint {endpoint} says http"
        ))),
        (Some(other), _) => Err(StoreError(format!(
            "etcd endpoint {endpoint}: unknown scheme {other}"
        ))),
    }
}

impl EtcdBackend {
    /// Connects, retrying with back-off until `connect_timeout`; then finishes or drops
    /// any batch journal a previous process left.
    pub async fn connect(cfg: &EtcdConfig) -> Result<Self, StoreError> {
        let urls = cfg
            .endpoints
            .iter()
            .map(|e| endpoint_url(e, cfg.tls.is_some()))
            .collect::<Result<Vec<_>, _>>()?;
        let endpoints = cfg.endpoints.join(",");
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(cfg.request_timeout.min(cfg.connect_timeout))
            .with_timeout(cfg.request_timeout)
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if let Some(tls) = &cfg.tls {
            let read = |p: &std::path::Path| {
                std::fs::read(p).map_err(|e| StoreError(format!("reading {}: {e}", p.display())))
            };
            let mut t = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)?));
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(etcd_client::Identity::from_pem(read(cert)?, read(key)?));
            }
            opts = opts.with_tls(t);
        }
        let deadline = tokio::time::Instant::now() + cfg.connect_timeout;
        let mut wait = Duration::from_millis(100);
        let conn = loop {
            // The first member that answers a read (connecting may be lazy).
            let mut last = None;
            let mut found = None;
            for (i, url) in urls.iter().enumerate() {
                let attempt = async {
                    let mut c = open_member(url, &opts).await?;
                    c.kv.get(cfg.prefix.as_bytes(), None).await?;
                    c.member = i;
                    Ok::<_, etcd_client::Error>(c)
                };
                match attempt.await {
                    Ok(c) => {
                        found = Some(c);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            match (found, last) {
                (Some(c), _) => break c,
                (None, Some(e)) if tokio::time::Instant::now() + wait < deadline => {
                    tracing::warn!(%endpoints, error = %e, "etcd not reachable yet; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                (None, e) => {
                    return Err(StoreError(format!(
                        "etcd at {endpoints} not reachable within {:?}: {}",
                        cfg.connect_timeout,
                        e.map_or("no endpoint".to_string(), |e| e.to_string())
                    )))
                }
            }
        };
        let backend = EtcdBackend {
            conn: Arc::new(std::sync::RwLock::new(conn)),
            urls: Arc::new(urls),
            opts,
            prefix: cfg.prefix.as_bytes().to_vec(),
            endpoints,
            max_ops: cfg.max_txn_ops.max(2),
            max_bytes: cfg.max_txn_bytes.max(4096),
            writable: Arc::new(AtomicBool::new(true)),
            out_of_space: Arc::new(AtomicBool::new(false)),
            seen: Arc::default(),
            fence: Arc::default(),
            deposed: Arc::new(tokio::sync::watch::channel(false).0),
            big: Arc::default(),
            big_range: cfg.big_range.max(1),
        };
        backend.settle_journals().await?;
        Ok(backend)
    }

    /// The etcd client of the member in use (elections, leases), and that member's index
    /// (for [`Self::next_member`]).
    pub fn client(&self) -> (Client, usize) {
        let c = self.conn();
        (c.client, c.member)
    }

    fn conn(&self) -> Conn {
        self.conn.read().expect("etcd connection lock").clone()
    }

    /// Moves to the next member that can be connected to, if `failed` is still the one in
    /// use (concurrent requests that failed on it move once).
    pub async fn next_member(&self, failed: usize) {
        if self.conn().member != failed {
            return;
        }
        let n = self.urls.len();
        for k in 1..=n {
            let i = (failed + k) % n;
            if let Ok(mut c) = open_member(&self.urls[i], &self.opts).await {
                c.member = i;
                let mut cur = self.conn.write().expect("etcd connection lock");
                if cur.member == failed {
                    tracing::warn!(unreachable = %self.urls[failed], now = %self.urls[i], "etcd member not reachable; moving to another");
                    *cur = c;
                }
                return;
            }
        }
    }

    /// The key namespace (`--etcd-prefix`).
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// A handle for one leadership term: every write through it requires `leader_key` (an
    /// election's key, outside the namespace) to exist with creation revision `rev`. The
    /// fence belongs to the returned handle alone, so a task of an earlier term that is still
    /// finishing in this process keeps its own, older fence and cannot write once this
    /// process is elected again; and this term starts undeposed.
    pub fn fenced(&self, leader_key: Vec<u8>, rev: i64) -> EtcdBackend {
        EtcdBackend {
            fence: Arc::new(std::sync::RwLock::new(Some((leader_key, rev)))),
            deposed: Arc::new(tokio::sync::watch::channel(false).0),
            ..self.clone()
        }
    }

    /// Turns true once a fenced write was refused because another leader was elected.
    pub fn deposed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.deposed.subscribe()
    }

    /// Runs `ops` if `when` holds (and the fence, if set). `Ok(false)`: a comparison of
    /// `when` failed. A failed fence is an error, and marks the store deposed.
    async fn write(&self, mut when: Vec<EtcdCompare>, ops: Vec<TxnOp>) -> Result<bool, StoreError> {
        let fence = self.fence.read().expect("fence lock").clone();
        if let Some((key, rev)) = &fence {
            when.push(EtcdCompare::create_revision(
                key.clone(),
                CompareOp::Equal,
                *rev,
            ));
        }
        let mut txn = Txn::new();
        if !when.is_empty() {
            txn = txn.when(when);
        }
        txn = txn.and_then(ops);
        if let Some((key, _)) = &fence {
            txn = txn.or_else(vec![TxnOp::get(key.clone(), None)]);
        }
        let r = self.run(txn).await?;
        if r.succeeded() {
            return Ok(true);
        }
        if let Some((key, rev)) = &fence {
            let holds = r.op_responses().iter().any(|o| {
                matches!(o, TxnOpResponse::Get(g)
                    if g.kvs().first().is_some_and(|kv| kv.create_revision() == *rev))
            });
            if !holds {
                self.deposed.send_replace(true);
                metrics::counter!(crate::metrics::FENCED_WRITES_TOTAL).increment(1);
                return Err(StoreError(format!(
                    "write refused: leadership of epoch {rev} is gone ({} no longer holds it)",
                    String::from_utf8_lossy(key)
                )));
            }
        }
        Ok(false)
    }

    fn key(&self, k: &[u8]) -> Vec<u8> {
        let mut full = self.prefix.clone();
        full.extend_from_slice(k);
        full
    }

    fn err(&self, e: etcd_client::Error) -> StoreError {
        StoreError(format!("etcd {}: {e}", self.endpoints))
    }

    /// A transaction, sent to the next member while the request could not reach one: a
    /// request that never left is safe to send again (unlike one that timed out, which is not
    /// retried: a conditional write could apply twice).
    async fn kv_txn(&self, txn: Txn) -> Result<etcd_client::TxnResponse, etcd_client::Error> {
        let mut attempt = 0;
        loop {
            let c = self.conn();
            match c.kv.clone().txn(txn.clone()).await {
                Err(e) if attempt < self.retries() && never_sent(&e) => {
                    attempt += 1;
                    self.next_member(c.member).await;
                    tokio::time::sleep(Duration::from_millis(20 * attempt as u64)).await;
                }
                r => return r,
            }
        }
    }

    /// A read, retried like [`Self::kv_txn`].
    async fn kv_get(
        &self,
        key: Vec<u8>,
        options: Option<GetOptions>,
    ) -> Result<etcd_client::GetResponse, etcd_client::Error> {
        let mut attempt = 0;
        loop {
            let c = self.conn();
            match c.kv.clone().get(key.clone(), options.clone()).await {
                Err(e) if attempt < self.retries() && never_sent(&e) => {
                    attempt += 1;
                    self.next_member(c.member).await;
                    tokio::time::sleep(Duration::from_millis(20 * attempt as u64)).await;
                }
                r => return r,
            }
        }
    }

    /// Tries of a request that did not reach a member: each member, twice over.
    fn retries(&self) -> u32 {
        (2 * self.urls.len()) as u32
    }

    /// Runs `txn`; an error (not a failed comparison) marks the store unwritable.
    async fn run(&self, txn: Txn) -> Result<etcd_client::TxnResponse, StoreError> {
        match self.kv_txn(txn).await {
            Ok(r) => Ok(r),
            Err(e) => {
                let was_writable = self.writable.swap(false, Ordering::SeqCst);
                if is_out_of_space(&e) {
                    if !self.out_of_space.swap(true, Ordering::SeqCst) {
                        metrics::gauge!(crate::metrics::STORE_OUT_OF_SPACE).set(1.0);
                        tracing::error!(endpoints = %self.endpoints, error = %e, "etcd is out of space (its NOSPACE alarm is raised): every write is refused and health is NOT_SERVING until an operator frees space, defragments and disarms the alarm (docs/OPERATIONS.md, \"etcd full\"); reads go on");
                    }
                } else if was_writable {
                    tracing::error!(endpoints = %self.endpoints, error = %e, "etcd write failed; health is NOT_SERVING until etcd takes writes again");
                }
                metrics::counter!(crate::metrics::STORE_WRITE_FAILURES_TOTAL).increment(1);
                Err(self.err(e))
            }
        }
    }

    fn txn_ops(&self, ops: &[Op]) -> Vec<TxnOp> {
        ops.iter()
            .map(|op| match op {
                Op::Put(k, v) => TxnOp::put(self.key(k), v.clone(), None),
                Op::Delete(k) => TxnOp::delete(self.key(k), None),
            })
            .collect()
    }
}

impl KvBackend for EtcdBackend {
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move { Ok(self.get_revision(key).await?.map(|(v, _)| v)) })
    }

    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>> {
        Box::pin(async move {
            let r = self
                .kv_get(self.key(&key), None)
                .await
                .map_err(|e| self.err(e))?;
            Ok(r.kvs()
                .first()
                .map(|kv| (kv.value().to_vec(), kv.mod_revision().max(0) as u64)))
        })
    }

    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(keys.len());
            // Later chunks read at the first one's revision: one snapshot.
            let mut revision = 0i64;
            for chunk in keys.chunks(self.max_ops) {
                let gets = chunk
                    .iter()
                    .map(|k| {
                        TxnOp::get(self.key(k), Some(GetOptions::new().with_revision(revision)))
                    })
                    .collect::<Vec<_>>();
                let r = self
                    .kv_txn(Txn::new().and_then(gets))
                    .await
                    .map_err(|e| self.err(e))?;
                if revision == 0 {
                    revision = r.header().map_or(0, |h| h.revision());
                }
                for resp in r.op_responses() {
                    match resp {
                        TxnOpResponse::Get(g) => {
                            out.push(g.kvs().first().map(|kv| kv.value().to_vec()))
                        }
                        _ => return Err(StoreError("etcd answered a get with another op".into())),
                    }
                }
            }
            Ok(out)
        })
    }

    fn batch(&self, ops: Vec<Op>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut chunks = self.chunks(ops)?;
            match chunks.len() {
                0 => Ok(()),
                1 => {
                    let c = chunks.pop().unwrap_or_default();
                    self.write(Vec::new(), self.txn_ops(&c)).await.map(|_| ())
                }
                _ => self.journaled(chunks).await,
            }
        })
    }

    fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let bytes: usize = ops.iter().map(op_bytes).sum();
            if ops.len() > self.max_ops || compares.len() > self.max_ops || bytes > self.max_bytes {
                return Err(StoreError(format!(
                    "a conditional write of {} operations ({bytes} bytes) exceeds one etcd transaction ({} operations, {} bytes)",
                    ops.len(),
                    self.max_ops,
                    self.max_bytes
                )));
            }
            let when: Vec<EtcdCompare> = compares
                .iter()
                .map(|c| match c {
                    // Version 0: the key does not exist.
                    Compare::Value(k, None) => {
                        EtcdCompare::version(self.key(k), CompareOp::Equal, 0)
                    }
                    Compare::Value(k, Some(v)) => {
                        EtcdCompare::value(self.key(k), CompareOp::Equal, v.clone())
                    }
                    Compare::Revision(k, r) => {
                        EtcdCompare::mod_revision(self.key(k), CompareOp::Equal, *r as i64)
                    }
                })
                .collect();
            self.write(when, self.txn_ops(&ops)).await
        })
    }

    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, Pairs> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new()); // etcd reads a limit of 0 as "no limit"
            }
            let start = match after {
                Some(mut a) if a >= prefix => {
                    a.push(0); // `after` is exclusive
                    a
                }
                _ => prefix.clone(),
            };
            // etcd (3.4) counts every key of a range it is asked for, however small the
            // limit, so a page read over the whole rest of a big kind costs as many steps
            // as the kind has keys: paging through a million feeds took minutes. A kind
            // once seen big has its pages after the first read instead as
            // segments that widen from the start key outwards (keys sharing all of the
            // start key, then all but its last byte, and so on up to the kind's prefix),
            // each read only while the page is not full.
            let from_start = start == prefix;
            let (start, prefix) = (self.key(&start), self.key(&prefix));
            let big = !from_start && self.big.lock().expect("big kinds").contains(&prefix);
            let mut out = Vec::new();
            let mut from = start.clone();
            let levels = if big { start.len() } else { prefix.len() };
            for d in (prefix.len()..=levels).rev() {
                let end = prefix_end(&start[..d]);
                if end <= from && end != [0] {
                    continue;
                }
                let mut r = self
                    .kv_get(
                        from.clone(),
                        Some(
                            GetOptions::new()
                                .with_range(end.clone())
                                .with_limit((limit - out.len()) as i64),
                        ),
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                if !big {
                    // One range to the kind's end: its count is what is left of the kind.
                    let mut kinds = self.big.lock().expect("big kinds");
                    if r.count() > self.big_range {
                        kinds.insert(prefix.clone());
                    } else if from_start {
                        kinds.remove(&prefix);
                    }
                }
                out.extend(r.take_kvs());
                if out.len() >= limit {
                    break;
                }
                from = end;
            }
            let n = self.prefix.len();
            Ok(out
                .into_iter()
                .map(|kv| (kv.key()[n..].to_vec(), kv.value().to_vec()))
                .collect())
        })
    }

    fn writable(&self) -> bool {
        self.writable.load(Ordering::SeqCst)
    }

    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let probe = Key::Probe.encode().map_err(|e| StoreError(e.to_string()))?;
            // A linearizable read: answered only with a quorum behind it.
            match self.kv_get(self.key(&probe), None).await {
                Ok(_) => Ok(()),
                Err(e) => {
                    if self.writable.swap(false, Ordering::SeqCst) {
                        tracing::error!(endpoints = %self.endpoints, error = %e, "etcd unreachable; health is NOT_SERVING until it answers");
                    }
                    Err(self.err(e))
                }
            }
        })
    }

    fn compact(&self) -> StoreFuture<'_, Option<u64>> {
        Box::pin(async move {
            let probe = Key::Probe.encode().map_err(|e| StoreError(e.to_string()))?;
            let now = self
                .kv_get(self.key(&probe), None)
                .await
                .map_err(|e| self.err(e))?
                .header()
                .map(|h| h.revision())
                .unwrap_or(0);
            let previous = self.seen.lock().expect("seen lock").replace(now);
            match previous {
                Some(rev) if rev > 0 => match self.conn().kv.compact(rev, None).await {
                    Ok(_) => Ok(Some(rev as u64)),
                    // Someone (etcd's own auto-compaction) went further already.
                    Err(e) if e.to_string().contains("compacted") => Ok(None),
                    Err(e) => Err(self.err(e)),
                },
                _ => Ok(None),
            }
        })
    }

    fn recover(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let probe = Key::Probe.encode().map_err(|e| StoreError(e.to_string()))?;
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            self.write(
                Vec::new(),
                vec![TxnOp::put(
                    self.key(&probe),
                    stamp.to_be_bytes().to_vec(),
                    None,
                )],
            )
            .await?;
            if !self.writable.swap(true, Ordering::SeqCst) {
                tracing::info!(endpoints = %self.endpoints, "etcd takes writes again");
            }
            if self.out_of_space.swap(false, Ordering::SeqCst) {
                metrics::gauge!(crate::metrics::STORE_OUT_OF_SPACE).set(0.0);
            }
            Ok(())
        })
    }
}

#[path = "etcd_journal.rs"]
mod journal;
#[cfg(test)]
use journal::{decode, encode};

#[cfg(test)]
#[path = "etcd_tests.rs"]
mod tests;
