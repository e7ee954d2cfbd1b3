//! The running worker: one session with the coordinator at a time, and a fetch loop that
//! outlives sessions.
//!
//! * **Session** — connect, `Register`, then three streams side by side: assignments
//!   (applied to the [`Schedule`]), reports (sent from the [`ReportBuffer`], acknowledged by
//!   sequence number) and heartbeats. When any of them fails (coordinator restart, lease
//!   lost, network), the session is torn down and a new one is opened with backoff; the
//!   first snapshot of the new session replaces the assignment, and every report not yet
//!   acknowledged is sent again.
//! * **Fetch loop** — sleeps until the next planned fetch, starts it when due (bounded
//!   concurrency, per-host spacing from the schedule), parses the body, keeps only items
//!   not seen before (the ids handed over with the assignment included), and queues the
//!   report. A full report buffer blocks the fetch that wants to report — back-pressure,
//!   never a dropped report. A `Retry-After` from the server postpones the feed's fetches
//!   until then; the report carries it.
//!
//! The parts live beside this file: `agent/assignments.rs` applies what the coordinator
//! assigns, `agent/fetching.rs` makes one fetch and queues its report, and `agent/tasks.rs`
//! runs the WebSub work the coordinator hands over.

use crate::credentials::{Bearer, Credentials};
use crate::fetch::{FetchConfig, Fetcher, Validators};
use crate::leader::{leading, wait_for_leader, LEADER_PROBE};
use crate::reports::ReportBuffer;
use crate::telemetry;
use kairos_proto::bounds;
use kairos_proto::v1 as pb;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_runtime::clock::SimClock;
use kairos_runtime::schedule::Schedule;
use pb::report_message::Body;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

mod assignments;
mod fetching;
mod tasks;

use assignments::assignments;
use fetching::{fetch_one, push_report};

/// The coordinator client, with the bearer token on every call.
type Client = WorkerControlClient<InterceptedService<Channel, Bearer>>;

/// Item ids remembered per feed.
const SEEN_PER_FEED: usize = 1024;

/// Settings of a worker.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Coordinator URL (`http://host:port`), or several separated by commas: replicas or
    /// Service addresses tried in turn when a session cannot be opened or ends.
    pub coordinator: String,
    /// Stable worker name (pod name).
    pub name: String,
    /// Fetches per second this worker can sustain (weights its share of hosts).
    pub capacity: f64,
    /// Fetches in flight at most.
    pub max_in_flight: usize,
    /// Wall time between two fetches of one host.
    pub host_gap: Duration,
    /// HTTP limits and target policy.
    pub fetch: FetchConfig,
    /// Unacknowledged reports kept at most.
    pub report_buffer: usize,
    /// On stop: how long to wait for the fetches in flight to finish and for every report
    /// to be acknowledged before giving up (zero: stop at once).
    pub drain_timeout: Duration,
    /// The (possibly compressed) clock.
    pub clock: SimClock,
    /// Where this worker accepts reader access events (empty: it does not).
    pub ingest_address: String,
    /// Token and TLS settings toward the coordinator.
    pub credentials: Credentials,
    /// Threads that read fetched documents at most ([`crate::document::Reader`]).
    pub parse_threads: usize,
    /// Wall time one document's reading may take before the fetch is reported malformed.
    pub parse_budget: Duration,
}

/// Counters of a running worker (for logs, tests and the standalone summary).
#[derive(Debug, Default)]
pub struct AgentStats {
    /// Fetches finished.
    pub fetches: AtomicU64,
    /// Reports acknowledged.
    pub acked: AtomicU64,
    /// Reports the coordinator refused (acknowledged, not ingested).
    pub rejected: AtomicU64,
    /// Sessions opened.
    pub sessions: AtomicU64,
    /// Fetches skipped: the server asked to retry later, the coordinator holds the feed
    /// (error back-off, its host's Retry-After), or the publisher's skipHours/skipDays.
    pub deferred: AtomicU64,
    /// `Retry-After` hints beyond [`MAX_RETRY_AFTER_SECONDS`], clamped to it.
    pub retry_after_clamped: AtomicU64,
    /// Fetches running now (sent in heartbeats).
    pub in_flight: AtomicU64,
    /// Assignment version last applied in the current session (sent in heartbeats).
    pub applied_version: AtomicU64,
}

/// Longest `Retry-After` a worker honours: a server asking for weeks (or sending a date years
/// ahead) must not silence a feed for that long; the plan's back-off takes over from here.
pub const MAX_RETRY_AFTER_SECONDS: u64 = 86_400;

/// A `Retry-After` in whole seconds, at most [`MAX_RETRY_AFTER_SECONDS`]; the flag says
/// whether it was clamped.
pub fn clamp_retry_after(d: Duration) -> (u32, bool) {
    let secs = d.as_secs();
    (
        secs.min(MAX_RETRY_AFTER_SECONDS) as u32,
        secs > MAX_RETRY_AFTER_SECONDS,
    )
}

struct FeedInfo {
    url: String,
    validators: Validators,
    seen: HashSet<u64>,
    order: VecDeque<u64>,
    not_before_ms: i64,
    /// The coordinator's hold (back-off, the host's Retry-After), Unix ms.
    held_until_ms: i64,
    /// Publisher's skipHours (bit h, UTC) and skipDays (bit 0 = Monday).
    skip_hours: u32,
    skip_days: u32,
    /// Already moved forward once for a first fetch.
    expedited: bool,
    /// When the coordinator wants the first fetch (Unix ms; 0 = at once): it paces first
    /// sights within each day's budget.
    first_fetch_ms: i64,
    /// Fetched at least once by this worker.
    fetched: bool,
}

impl FeedInfo {
    fn never_fetched(&self) -> bool {
        !self.expedited
            && !self.fetched
            && self.seen.is_empty()
            && self.validators.etag.is_none()
            && self.validators.last_modified.is_none()
    }

    /// Forgets what this worker's own fetches taught it of the feed (its validators and the
    /// items it saw), after the coordinator refused one of their reports: the postings in
    /// it were never stored, and a worker that kept them as seen, or sent the validators of
    /// that fetch, would never report them again if the feed came back to it (a 304, or
    /// items already seen). Its next fetch is unconditional and reports every item; the
    /// coordinator's markers keep the ones it has from being stored twice.
    fn unlearn(&mut self) {
        self.validators = Validators::default();
        self.seen.clear();
        self.order.clear();
    }

    fn remember(&mut self, id: u64) -> bool {
        if !self.seen.insert(id) {
            return false;
        }
        self.order.push_back(id);
        while self.order.len() > SEEN_PER_FEED {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

struct State {
    schedule: Schedule,
    feeds: HashMap<String, FeedInfo>,
    reports: ReportBuffer<Body>,
}

struct Shared {
    state: Mutex<State>,
    schedule_changed: Notify,
    reports_ready: Notify,
    space: Notify,
    stats: Arc<AgentStats>,
    clock: SimClock,
    /// Reads fetched documents off the runtime's threads.
    reader: crate::document::Reader,
    /// The live session's client and id, for the word that it is leaving.
    session: Mutex<Option<(Client, String)>>,
}

/// Why the worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The HTTP client could not be built.
    #[error(transparent)]
    Setup(#[from] crate::fetch::SetupError),
    /// The coordinator URL is unusable.
    #[error("bad coordinator URL `{0}`: {1}")]
    BadCoordinator(String, String),
}

/// Runs the worker until `stop` turns true. Access events arriving on `relay` (the
/// worker's public `Ingest` endpoint) are forwarded with the reports.
pub async fn run(
    cfg: AgentConfig,
    stats: Arc<AgentStats>,
    relay: Option<tokio::sync::mpsc::Receiver<Vec<pb::AccessEvent>>>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), AgentError> {
    let endpoints = coordinator_endpoints(&cfg.credentials, &cfg.coordinator)?;
    let fetcher = Fetcher::new(cfg.fetch.clone())?;
    // The same client (pool, address policy, proxy) sends WebSub requests to hubs.
    let hub_client = fetcher.clone();
    let gap_ms = (cfg.host_gap.as_secs_f64() * 1000.0 * cfg.clock.scale()) as i64;
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            schedule: Schedule::new(gap_ms),
            feeds: HashMap::new(),
            reports: ReportBuffer::new(cfg.report_buffer),
        }),
        schedule_changed: Notify::new(),
        reports_ready: Notify::new(),
        space: Notify::new(),
        stats,
        clock: cfg.clock,
        reader: crate::document::Reader::new(cfg.parse_threads, cfg.parse_budget),
        session: Mutex::new(None),
    });
    let fetching = tokio::spawn(fetch_loop(
        shared.clone(),
        fetcher,
        cfg.max_in_flight.max(1),
        stop.clone(),
    ));
    let fetch_abort = fetching.abort_handle();
    let relaying = relay.map(|rx| tokio::spawn(relay_loop(shared.clone(), rx)));
    // Drained: the fetch loop has stopped starting fetches and the ones in flight have
    // finished (it returns then), and every report is acknowledged. Polled only once
    // stopping, so it cannot finish early.
    let drained = {
        let shared = shared.clone();
        async move {
            let _ = fetching.await;
            while shared.state.lock().expect("worker state").reports.backlog() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    tokio::pin!(drained);
    let mut deadline: Option<tokio::time::Instant> =
        (*stop.borrow()).then(|| tokio::time::Instant::now() + cfg.drain_timeout);
    let mut backoff = Duration::from_millis(100);
    let mut at = 0usize;
    // Stopping does not end the session: it keeps sending reports until drained or the
    // deadline, so a SIGTERM loses nothing that was fetched.
    let finished_draining = 'sessions: loop {
        let (address, endpoint) = &endpoints[at];
        let ended = {
            let sess = session(endpoint, &cfg, &shared, &hub_client);
            tokio::pin!(sess);
            loop {
                tokio::select! {
                    r = &mut sess => break r,
                    _ = stop.changed(), if deadline.is_none() => {
                        deadline = Some(tokio::time::Instant::now() + cfg.drain_timeout);
                    }
                    _ = &mut drained, if deadline.is_some() => break 'sessions true,
                    _ = sleep_until(deadline), if deadline.is_some() => break 'sessions false,
                }
            }
        };
        // Jittered, so the workers of a failed coordinator do not all come back at once.
        let mut wait = backoff.mul_f64(rand::Rng::gen_range(&mut rand::thread_rng(), 0.5..1.5));
        let mut at_is_a_guess = false;
        match ended {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(e) => {
                // The replica that leads now, asked of every address at once: trying them
                // in turn spends a connect timeout on each replica that is cut off or
                // paused. Without an answer, the next address: a standby, another replica,
                // or the same one again.
                match leading(&endpoints, LEADER_PROBE).await {
                    Some(i) => {
                        at = i;
                        wait = wait.min(Duration::from_millis(250));
                        at_is_a_guess = false;
                    }
                    None => {
                        at = (at + 1) % endpoints.len();
                        at_is_a_guess = true;
                    }
                }
                tracing::warn!(worker = %cfg.name, coordinator = %address, error = %e, retry_in = ?wait, next = %endpoints[at].0, "coordinator session ended");
            }
        }
        // Without a leader, the wait asks about once a second whether one serves now.
        tokio::select! {
            found = wait_for_leader(&endpoints, wait), if at_is_a_guess => {
                if let Some(i) = found {
                    at = i;
                }
            }
            _ = tokio::time::sleep(wait), if !at_is_a_guess => {}
            _ = stop.changed(), if deadline.is_none() => {
                deadline = Some(tokio::time::Instant::now() + cfg.drain_timeout);
            }
            _ = &mut drained, if deadline.is_some() => break true,
            _ = sleep_until(deadline), if deadline.is_some() => break false,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    };
    let backlog = shared.state.lock().expect("worker state").reports.backlog();
    if finished_draining {
        tracing::info!(worker = %cfg.name, "drained: fetches finished, reports acknowledged");
    } else {
        tracing::warn!(worker = %cfg.name, unacknowledged = backlog, timeout = ?cfg.drain_timeout, "stopped before draining: reports left unacknowledged (the next owner fetches those feeds again)");
    }
    fetch_abort.abort();
    if let Some(r) = relaying {
        r.abort();
    }
    leave(&shared, &cfg.name).await;
    Ok(())
}

/// Longest wait for the coordinator to take the word that this worker is leaving.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Tells the coordinator that this worker is stopping, so it deals the worker's hosts to
/// the others now rather than when the lease runs out (a scale-down otherwise leaves
/// them unfetched for a lease).
async fn leave(shared: &Shared, name: &str) {
    let Some((mut client, id)) = shared.session.lock().expect("worker session").take() else {
        return;
    };
    let bye = client.heartbeat(pb::HeartbeatRequest {
        worker_id: id,
        sent_unix_ms: shared.clock.now_ms(),
        leaving: true,
        ..Default::default()
    });
    match tokio::time::timeout(LEAVE_TIMEOUT, bye).await {
        Ok(Ok(_)) => {
            tracing::info!(worker = %name, "left: the coordinator deals its hosts to the other workers now")
        }
        Ok(Err(e)) => {
            tracing::warn!(worker = %name, error = %e, "could not say it is leaving: its hosts move when its lease runs out")
        }
        Err(_) => {
            tracing::warn!(worker = %name, timeout = ?LEAVE_TIMEOUT, "no answer to its leaving: its hosts move when its lease runs out")
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The endpoints of a comma-separated coordinator list, in order; an empty list or any
/// unusable address is refused.
pub fn coordinator_endpoints(
    credentials: &Credentials,
    list: &str,
) -> Result<Vec<(String, Endpoint)>, AgentError> {
    let addresses: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    if addresses.is_empty() {
        return Err(AgentError::BadCoordinator(
            list.to_string(),
            "no address given".into(),
        ));
    }
    addresses
        .into_iter()
        .map(|a| {
            let endpoint = credentials
                .endpoint(a)
                .map_err(|e| AgentError::BadCoordinator(a.to_string(), e))?
                .connect_timeout(Duration::from_secs(5))
                // A coordinator that is paused or cut off keeps its TCP connections open
                // (the kernel still acknowledges): HTTP/2 pings find it out, and the
                // assignment stream ends instead of waiting forever.
                .http2_keep_alive_interval(Duration::from_secs(5))
                .keep_alive_timeout(Duration::from_secs(5))
                .keep_alive_while_idle(true)
                .tcp_nodelay(true);
            Ok((a.to_string(), endpoint))
        })
        .collect()
}

/// Longest wait for a coordinator to answer a registration (one that accepted the
/// connection but is paused must not hold the worker: the next address is tried).
const REGISTER_TIMEOUT: Duration = Duration::from_secs(4);

/// One session: register, then assignments, reports, tasks and heartbeats until one fails.
async fn session(
    endpoint: &Endpoint,
    cfg: &AgentConfig,
    shared: &Arc<Shared>,
    fetcher: &Fetcher,
) -> Result<(), tonic::Status> {
    let channel = endpoint.connect().await.map_err(|e| {
        tonic::Status::unavailable(format!(
            "connecting: {}",
            kairos_runtime::process::error_chain(&e)
        ))
    })?;
    let bearer = cfg
        .credentials
        .bearer()
        .map_err(tonic::Status::unauthenticated)?;
    // Pushed documents come on the task stream, up to the coordinator's bound on them.
    let mut client = WorkerControlClient::with_interceptor(channel, Bearer(bearer))
        .max_decoding_message_size(bounds::MAX_DECODE_BYTES);
    let reg = tokio::time::timeout(
        REGISTER_TIMEOUT,
        client.register(pb::RegisterRequest {
            worker_name: cfg.name.clone(),
            capacity_fetches_per_second: cfg.capacity,
            ingest_address: cfg.ingest_address.clone(),
        }),
    )
    .await
    .map_err(|_| {
        tonic::Status::deadline_exceeded(format!(
            "registering: no answer within {REGISTER_TIMEOUT:?}"
        ))
    })??
    .into_inner();
    shared.stats.sessions.fetch_add(1, Ordering::Relaxed);
    shared.stats.applied_version.store(0, Ordering::Relaxed);
    tracing::info!(worker = %reg.worker_id, epoch = reg.epoch, "registered");
    {
        let mut st = shared.state.lock().expect("worker state");
        // A new session numbers its versions from 1 again; its snapshot replaces all.
        st.schedule.begin_session();
        st.reports.reset_stream();
    }
    let hb = Duration::from_millis(reg.heartbeat_interval_ms.clamp(100, 60_000) as u64);
    let id = reg.worker_id;
    *shared.session.lock().expect("worker session") = Some((client.clone(), id.clone()));
    tokio::select! {
        r = assignments(client.clone(), &id, reg.epoch, shared) => r,
        r = reports(client.clone(), &id, reg.epoch, shared) => r,
        r = tasks::tasks(client.clone(), &id, shared, fetcher.clone()) => r,
        r = heartbeats(client, &id, hb, shared) => r,
    }
}

async fn reports(
    mut client: Client,
    id: &str,
    epoch: u64,
    shared: &Arc<Shared>,
) -> Result<(), tonic::Status> {
    let (tx, rx) = tokio::sync::mpsc::channel::<pb::ReportMessage>(1024);
    let mut acks = client.report(ReceiverStream::new(rx)).await?.into_inner();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = shared.reports_ready.notified() => {}
            _ = tick.tick() => {}
            ack = acks.message() => {
                let Some(ack) = ack? else {
                    return Err(tonic::Status::unavailable("report stream closed"));
                };
                let n = {
                    let mut state = shared.state.lock().expect("worker state");
                    let state = &mut *state;
                    for r in &ack.rejected {
                        if let Some(Body::Fetch(f)) = state.reports.get(r.seq) {
                            if let Some(info) = state.feeds.get_mut(&f.feed_id) {
                                info.unlearn();
                            }
                        }
                    }
                    state.reports.ack(ack.acked_seq)
                };
                shared.stats.acked.fetch_add(n as u64, Ordering::Relaxed);
                for r in &ack.rejected {
                    // Acknowledged and not ingested: the worker moves on, having forgotten
                    // what the fetch taught it (above). Logged here, where it is handled, so
                    // an operator sees why.
                    tracing::warn!(seq = r.seq, reason = %r.reason, "the coordinator refused a report message");
                    metrics::counter!(telemetry::REPORTS_REFUSED_TOTAL).increment(1);
                }
                shared.stats.rejected.fetch_add(ack.rejected.len() as u64, Ordering::Relaxed);
                shared.space.notify_waiters();
                continue;
            }
        }
        let unsent = shared
            .state
            .lock()
            .expect("worker state")
            .reports
            .take_unsent();
        for (seq, body) in unsent {
            let msg = pb::ReportMessage {
                worker_id: id.to_string(),
                seq,
                epoch,
                body: Some(body),
            };
            if tx.send(msg).await.is_err() {
                return Err(tonic::Status::unavailable("report stream closed"));
            }
        }
    }
}

async fn heartbeats(
    mut client: Client,
    id: &str,
    every: Duration,
    shared: &Arc<Shared>,
) -> Result<(), tonic::Status> {
    let mut tick = tokio::time::interval(every);
    // The coordinator expires a worker that has not heartbeated for its lease (a few
    // intervals): a heartbeat unanswered for as long means this session is over on the
    // other side too (a paused or partitioned leader), so the worker moves on.
    let patience = (every * 3).max(Duration::from_secs(1));
    let mut clock_off = false;
    loop {
        tick.tick().await;
        let backlog = shared.state.lock().expect("worker state").reports.backlog() as u64;
        let in_flight = shared.stats.in_flight.load(Ordering::Relaxed);
        metrics::gauge!(telemetry::REPORT_BACKLOG).set(backlog as f64);
        metrics::gauge!(telemetry::FETCHES_IN_FLIGHT).set(in_flight as f64);
        let sent = shared.clock.now_ms();
        let beat = client.heartbeat(pb::HeartbeatRequest {
            worker_id: id.to_string(),
            report_backlog: backlog,
            in_flight: in_flight.min(u32::MAX as u64) as u32,
            applied_version: shared.stats.applied_version.load(Ordering::Relaxed),
            sent_unix_ms: sent,
            leaving: false,
        });
        let answer = tokio::time::timeout(patience, beat).await.map_err(|_| {
            tonic::Status::unavailable(format!(
                "no heartbeat answer within {patience:?}: the coordinator is paused or cut off"
            ))
        })??;
        // The coordinator's clock against this one's at mid-flight: fetch times come from
        // the coordinator, so an offset here is how far off the plan this worker fetches.
        let at = answer.into_inner().coordinator_unix_ms;
        if at != 0 {
            // Any value the coordinator sends is taken without overflow.
            let mid = sent / 2 + shared.clock.now_ms() / 2;
            let offset = mid.saturating_sub(at);
            let is_off = offset.unsigned_abs() > 30_000;
            if is_off != clock_off {
                clock_off = is_off;
                if is_off {
                    tracing::warn!(
                        offset_s = offset as f64 / 1000.0,
                        "this worker's clock differs from the coordinator's: it fetches off the plan by as much (check NTP on both)"
                    );
                }
            }
        }
    }
}

async fn fetch_loop(
    shared: Arc<Shared>,
    fetcher: Fetcher,
    max_in_flight: usize,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(max_in_flight));
    // At zero from the start, so a dashboard and an alert see "none held" (or deferred)
    // rather than nothing at all.
    metrics::counter!(telemetry::FETCHES_HELD_TOTAL).increment(0);
    metrics::counter!(telemetry::FETCHES_DEFERRED_TOTAL).increment(0);
    loop {
        let now = shared.clock.now_ms();
        let (due, next) = {
            let mut st = shared.state.lock().expect("worker state");
            let held = st.schedule.gate().held_total();
            let deferred = st.schedule.minutes().deferred_total();
            let due = st.schedule.pop_due(now);
            let gate = st.schedule.gate();
            if gate.held_total() > held {
                metrics::counter!(telemetry::FETCHES_HELD_TOTAL)
                    .increment(gate.held_total() - held);
            }
            let more = st.schedule.minutes().deferred_total() - deferred;
            if more > 0 {
                metrics::counter!(telemetry::FETCHES_DEFERRED_TOTAL).increment(more);
            }
            metrics::gauge!(telemetry::DAY_FETCHES).set(gate.started_today() as f64);
            (due, st.schedule.next_due())
        };
        tracing::trace!(now, due = due.len(), next = ?next, "fetch loop");
        let n = due.len();
        for (i, d) in due.into_iter().enumerate() {
            if permits.available_permits() == 0 {
                metrics::gauge!(telemetry::FETCHES_DUE_WAITING).set((n - i) as f64);
            }
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let shared = shared.clone();
            let fetcher = fetcher.clone();
            shared.stats.in_flight.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                fetch_one(&shared, &fetcher, &d.feed_id, d.planned_ms, now).await;
                shared.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
                drop(permit);
            });
        }
        if n > 0 {
            metrics::gauge!(telemetry::FETCHES_DUE_WAITING).set(0.0);
            metrics::gauge!(telemetry::FETCHES_IN_FLIGHT)
                .set(shared.stats.in_flight.load(Ordering::Relaxed) as f64);
        }
        let wait = next
            .map(|t| shared.clock.wall_until(t))
            .unwrap_or(Duration::from_secs(1))
            .min(Duration::from_secs(1));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.schedule_changed.notified() => {}
            _ = stop.changed() => break,
        }
    }
    // Stopping: no new fetch starts; the ones in flight finish (their reports are queued).
    let _ = permits.acquire_many(max_in_flight as u32).await;
}

/// Moves access events from the public endpoint into the report stream.
async fn relay_loop(
    shared: Arc<Shared>,
    mut rx: tokio::sync::mpsc::Receiver<Vec<pb::AccessEvent>>,
) {
    while let Some(events) = rx.recv().await {
        for events in bounds::split_accesses(events) {
            push_report(&shared, Body::Accesses(pb::AccessBatch { events })).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::assignments::{adopt, assemble};
    use super::*;

    #[test]
    fn split_updates_are_applied_whole() {
        use pb::assignment_update::Update;
        let feed = |id: &str| pb::FeedAssignment {
            feed_id: id.into(),
            ..Default::default()
        };
        let part = |version, feeds: Vec<pb::FeedAssignment>, more| pb::AssignmentUpdate {
            epoch: 1,
            version,
            update: Some(Update::Snapshot(pb::AssignmentSnapshot { feeds, more })),
            allowance: None,
        };
        let mut pending = None;
        assert!(assemble(&mut pending, part(3, vec![feed("a")], true)).is_none());
        assert!(assemble(&mut pending, part(3, vec![feed("b")], true)).is_none());
        let whole = assemble(&mut pending, part(3, vec![feed("c")], false)).unwrap();
        let Some(Update::Snapshot(s)) = whole.update else {
            panic!("a snapshot")
        };
        let ids: Vec<&str> = s.feeds.iter().map(|f| f.feed_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(pending.is_none());
        // An abandoned version's parts are dropped, not mixed into the next one.
        assert!(assemble(&mut pending, part(4, vec![feed("x")], true)).is_none());
        let whole = assemble(&mut pending, part(5, vec![feed("y")], false)).unwrap();
        let Some(Update::Snapshot(s)) = whole.update else {
            panic!("a snapshot")
        };
        assert_eq!(s.feeds.len(), 1);
        assert_eq!(whole.version, 5);
    }

    #[test]
    fn retry_after_is_clamped_to_a_day_and_flagged() {
        assert_eq!(clamp_retry_after(Duration::from_secs(0)), (0, false));
        assert_eq!(clamp_retry_after(Duration::from_secs(120)), (120, false));
        assert_eq!(
            clamp_retry_after(Duration::from_secs(86_400)),
            (86_400, false)
        );
        // Years ahead (and past u32 seconds) must not wrap around to a short wait.
        assert_eq!(
            clamp_retry_after(Duration::from_secs(10 * 365 * 86_400)),
            (86_400, true)
        );
        assert_eq!(
            clamp_retry_after(Duration::from_secs(1 << 40)),
            (86_400, true)
        );
    }

    #[test]
    fn a_feed_whose_report_was_refused_is_fetched_afresh_when_it_comes_back() {
        let a = pb::FeedAssignment {
            feed_id: "f".into(),
            url: "http://127.0.0.1:1/f".into(),
            etag: "\"stored\"".into(),
            recent_item_id_hashes: vec![1, 2],
            ..Default::default()
        };
        let mut feeds = HashMap::new();
        adopt(&mut feeds, &a);
        // This worker fetched it: new validators, items 3 and 4 seen; the report was refused.
        let info = feeds.get_mut("f").unwrap();
        info.validators.etag = Some("\"fetched\"".into());
        assert!(info.remember(3) && info.remember(4));
        info.unlearn();
        // The feed comes back: what the coordinator stored holds, items 3 and 4 are new.
        adopt(&mut feeds, &a);
        let info = &feeds["f"];
        assert_eq!(
            info.validators,
            Validators::default(),
            "an unconditional fetch"
        );
        let mut seen: Vec<u64> = info.seen.iter().copied().collect();
        seen.sort();
        assert_eq!(seen, vec![1, 2]);
    }
}
