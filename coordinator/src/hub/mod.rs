//! The live coordinator: one owner for the registry, the ingest store, the access
//! statistics, the worker cluster and every feed's learned state, and the loops that
//! relearn, replan and expire leases.
//!
//! Locks are short and synchronous (`std::sync::Mutex`, never held across an `.await`).
//! The relearn + plan step runs on the blocking pool with the replanner taken out of its
//! slot: no lock is held across a solve, settings are read from their own copy and plan
//! inspection from the view the last round published, so Admin calls stay fast while a
//! 100k-feed round solves (`benches/admin_latency.rs`).
//! Report ingest writes the postings and the feeds' learned state in one atomic batch.

use crate::access::AccessStats;
use crate::control::cluster::{Cluster, ClusterConfig, ClusterError, Desired, WorkerInfo};
use crate::control::feedstate::{FeedState, FetchObservation};
use crate::control::health::HealthPolicy;
use crate::control::readers;
use crate::control::relearn::{self, PlanOutcome, PlannerSettings, Replanner};
use crate::control::FeedSpec;
use crate::ingest::{IngestError, Ingestor, PostingRecord};
use crate::metrics as m;
use crate::registry::Registry;
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};
use kairos_proto::v1 as pb;
use kairos_runtime::clock::SimClock;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod access_state;
mod checks;
mod figures;
mod health;
mod limits;
use figures::{outcome_label, warn_unspent};
pub use figures::{FeedView, HealthView, PlanFigures, SettingsRecord, Totals};

const DAY_MS: i64 = 86_400_000;
/// Reader accesses remembered per user for the missed-postings measure.
const ACCESSES_PER_USER: usize = 512;

/// Settings of the live coordinator.
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// Leases and sharding.
    pub cluster: ClusterConfig,
    /// Planner settings.
    pub planner: PlannerSettings,
    /// Wall-clock time between relearn + replan rounds.
    pub replan_interval: Duration,
    /// Back-off, hints and the malformed flag.
    pub health: HealthPolicy,
    /// How long postings and item markers are kept.
    pub retention: crate::retention::Retention,
}

/// Runs `f` on the replanner, containing a panic inside it: the panic becomes an error of
/// this round and the replanner comes back fresh (the next round solves afresh from the
/// same settings). Without this, one panic in the solver would lose the replanner and every
/// later round would fail until a restart, with the process still up.
fn guarded<T>(
    mut replanner: Replanner,
    f: impl FnOnce(&mut Replanner) -> T,
) -> (Replanner, Result<T, String>) {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut replanner)));
    match out {
        Ok(v) => (replanner, Ok(v)),
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let fresh = Replanner::new(replanner.settings().clone());
            m::record_planner_panic();
            (
                fresh,
                Err(format!(
                    "the planner panicked ({why}); the next round solves afresh"
                )),
            )
        }
    }
}

/// The replanner between rounds, with the generation of the settings it was given. A round
/// takes it out of its slot for the solve and puts it back when done, so no lock is held
/// while it solves; readers use [`Hub::settings`] and the published plan view instead.
struct Parked {
    generation: u64,
    replanner: Replanner,
}

type PlanView = Arc<
    HashMap<
        String,
        (
            crate::plan::planner::FeedModel,
            crate::plan::planner::FeedPlan,
        ),
    >,
>;

/// One fetch report after the ownership check.
struct Accepted {
    report: pb::FetchReport,
    postings: Vec<PostingRecord>,
}

/// The live coordinator state.
pub struct Hub<B> {
    store: Arc<B>,
    /// Feeds, users, subscriptions.
    pub registry: Registry<B>,
    /// Postings.
    pub ingestor: Arc<Ingestor<B>>,
    /// Reader access statistics.
    pub access: Arc<Mutex<AccessStats>>,
    cluster: Mutex<Cluster>,
    feeds: Mutex<HashMap<String, FeedState>>,
    subscribers: Mutex<HashMap<String, Vec<String>>>,
    recent_access: Mutex<HashMap<String, VecDeque<i64>>>,
    /// The planner settings in force and their generation (bumped by every update).
    settings: Mutex<(u64, PlannerSettings)>,
    /// One settings update at a time, so the stored and the in-force settings agree.
    settings_update: tokio::sync::Mutex<()>,
    /// One round at a time (the periodic loop, the first round at start, tests); held
    /// across the round's awaits, it blocks no thread and no reader.
    rounds: tokio::sync::Mutex<()>,
    /// The replanner, absent while a round solves.
    replanner: Arc<Mutex<Option<Parked>>>,
    /// Every feed's model and plan from the last round, for inspection.
    plan_view: Arc<Mutex<PlanView>>,
    /// Hosts that throttled us.
    throttles: Mutex<crate::control::hosts::HostThrottles>,
    /// Operators' per-host limits, fetches per day.
    host_limits: Mutex<HashMap<String, f64>>,
    /// What bounded the last plan.
    bounds: Mutex<health::FeedBounds>,
    totals: Mutex<Totals>,
    clock: SimClock,
    /// Since when the reader access statistics have been collected (survives restarts).
    access_since_ms: i64,
    cfg: HubConfig,
}

impl<B: KvBackend> Hub<B> {
    /// Loads the registry, access statistics and learned state from `store`.
    pub async fn open(store: Arc<B>, clock: SimClock, cfg: HubConfig) -> anyhow::Result<Self> {
        cfg.planner
            .validate()
            .map_err(|e| anyhow::anyhow!("planner settings: {e}"))?;
        let registry = Registry::new(store.clone());
        let mut access = AccessStats::new(24, DAY_MS);
        let (users, feeds) = (registry.all_users().await?, registry.all_feeds().await?);
        for u in &users {
            access.set_user(&u.id, u.weight as f32);
        }
        for f in &feeds {
            access.set_feed(&f.id);
        }
        m::gauge_registry(feeds.len(), users.len());
        let mut learned = HashMap::new();
        let prefix = Key::Learned("").prefix()?;
        let mut after = None;
        loop {
            let page = store.range(prefix.clone(), after.clone(), 1000).await?;
            let Some(last) = page.last() else { break };
            after = Some(last.0.clone());
            for (k, v) in &page {
                let feed = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
                match serde_json::from_slice::<FeedState>(v) {
                    Ok(st) => {
                        learned.insert(feed, st);
                    }
                    // Relearnable: drop it rather than refuse to start.
                    Err(e) => tracing::warn!(%feed, error = %e, "unreadable learned state skipped"),
                }
            }
        }
        tracing::info!(
            feeds = feeds.len(),
            users = users.len(),
            learned = learned.len(),
            "state loaded"
        );
        let epoch = cfg.cluster.epoch.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        });
        let mut planner = cfg.planner.clone();
        if let Some(v) = store.get(Key::Settings.encode()?).await? {
            match serde_json::from_slice::<SettingsRecord>(&v)
                .map_err(|e| e.to_string())
                .and_then(|r| r.apply(&planner))
            {
                Ok(p) => {
                    // Replicas (or a restart) with other flags than the settings an operator
                    // stored: the stored ones win, and the difference is said once, here.
                    let (stored, flags) = (SettingsRecord::of(&p), SettingsRecord::of(&planner));
                    if stored != flags {
                        tracing::warn!(?stored, command_line = ?flags, "the planner settings in the store (set through the Admin API) differ from the command line's; the stored ones are in force");
                    }
                    planner = p;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "stored planner settings unusable; using the command line's")
                }
            }
        }
        let access_since_ms =
            access_state::load(store.as_ref(), &mut access, clock.now_ms()).await?;
        let host_limits = crate::host_limits::all(store.as_ref())
            .await?
            .into_iter()
            .map(|l| (l.host, l.max_fetches_per_day))
            .collect();
        Ok(Hub {
            store: store.clone(),
            registry,
            ingestor: Arc::new(Ingestor::new(store)),
            access: Arc::new(Mutex::new(access)),
            cluster: Mutex::new(Cluster::new(cfg.cluster.clone(), epoch)),
            feeds: Mutex::new(learned),
            subscribers: Mutex::new(HashMap::new()),
            recent_access: Mutex::new(HashMap::new()),
            settings: Mutex::new((0, planner.clone())),
            settings_update: tokio::sync::Mutex::new(()),
            rounds: tokio::sync::Mutex::new(()),
            replanner: Arc::new(Mutex::new(Some(Parked {
                generation: 0,
                replanner: Replanner::new(planner),
            }))),
            plan_view: Arc::default(),
            throttles: Mutex::new(Default::default()),
            host_limits: Mutex::new(host_limits),
            bounds: Mutex::new(Default::default()),
            totals: Mutex::new(Totals::default()),
            access_since_ms,
            clock,
            cfg,
        })
    }

    /// The clock everything is timed by.
    pub fn clock(&self) -> SimClock {
        self.clock
    }

    /// The settings.
    pub fn config(&self) -> &HubConfig {
        &self.cfg
    }

    /// A copy of the running totals.
    pub fn totals(&self) -> Totals {
        self.totals.lock().expect("totals lock").clone()
    }

    /// The planner settings in force.
    pub fn settings(&self) -> PlannerSettings {
        self.settings.lock().expect("settings lock").1.clone()
    }

    /// Validates, persists and installs new planner settings; the next round replans
    /// every feed with them.
    pub async fn update_settings(&self, r: &SettingsRecord) -> Result<PlannerSettings, String> {
        let _one_at_a_time = self.settings_update.lock().await;
        let next = r.apply(&self.settings())?;
        // A total budget below what the per-feed minimums of the feeds registered now need
        // would make every replan fail while the setting stayed in force.
        let feeds = self
            .registry
            .all_feeds()
            .await
            .map_err(|e| e.to_string())?
            .len();
        let (min_level, _) = next.levels();
        let needed =
            feeds as f64 * crate::plan::alloc::level_rate(min_level) / next.days_per_period();
        let budget = next.budget.per_day(feeds);
        if feeds > 0 && budget < needed * (1.0 - 1e-9) {
            return Err(format!(
                "a budget of {budget} fetches per day is below the {needed:.3} that the minimum of {} fetches per feed per day needs for the {feeds} registered feeds",
                next.min_fetches_per_day
            ));
        }
        let key = Key::Settings.encode().map_err(|e| e.to_string())?;
        let value = serde_json::to_vec(&SettingsRecord::of(&next)).expect("settings serialize");
        self.store
            .batch(vec![Op::Put(key, value)])
            .await
            .map_err(|e| e.to_string())?;
        {
            let mut s = self.settings.lock().expect("settings lock");
            *s = (s.0 + 1, next.clone());
        }
        tracing::info!(settings = ?SettingsRecord::of(&next), "planner settings updated");
        Ok(next)
    }

    /// A feed's learned model and plan from the last round.
    pub fn inspect(&self, feed: &str) -> Option<FeedView> {
        let spec = self.feed_spec(feed)?;
        let observed = self
            .feed_state(feed)
            .map(|s| s.observed_postings())
            .unwrap_or(0);
        let bounds = self
            .bounds
            .lock()
            .expect("bounds lock")
            .bounds
            .get(feed)
            .cloned()
            .unwrap_or_default();
        let view = self.plan_view.lock().expect("plan view lock").clone();
        let (model, plan) = view.get(feed)?;
        let per_day: f64 = model.post_bins.iter().map(|&b| b as f64).sum();
        let fetches = spec.offsets_seconds.len() as f64 * 86_400.0 / spec.period_seconds;
        Some(FeedView {
            posting_rate_per_hour: model.post_bins.iter().map(|&b| b as f64).collect(),
            access_rate_per_hour: model.access_bins.iter().map(|&b| b as f64).collect(),
            fetches_per_day: fetches,
            offsets_seconds: spec.offsets_seconds,
            period_seconds: spec.period_seconds,
            expected_delay_seconds: if per_day > 0.0 && model.weight > 0.0 {
                plan.expected_cost / model.weight / per_day
            } else {
                0.0
            },
            observed_postings: observed,
            constraints: bounds.reasons,
            max_fetches_per_day: bounds.max_per_day,
            not_before_unix_ms: bounds.not_before_ms.unwrap_or(0),
            status: self.feed_health(feed).status,
        })
    }

    /// A feed's fetch health.
    pub fn feed_health(&self, feed: &str) -> HealthView {
        let now = self.clock.now_ms();
        let feeds = self.feeds.lock().expect("feeds lock");
        match feeds.get(feed) {
            Some(st) => HealthView {
                status: st
                    .health
                    .status(st.last_answered_ms.is_some(), now, &self.cfg.health),
                consecutive_failures: st.health.consecutive_failures,
                last_error: st.health.last_error.clone(),
            },
            None => HealthView {
                status: "new",
                ..HealthView::default()
            },
        }
    }

    /// Subscriptions known at the last replan.
    pub fn subscriptions(&self) -> usize {
        self.subscribers
            .lock()
            .expect("subscribers lock")
            .values()
            .map(Vec::len)
            .sum()
    }

    /// Feeds in the current plan.
    pub fn feeds_planned(&self) -> usize {
        self.cluster.lock().expect("cluster lock").feeds().len()
    }

    /// Live worker sessions.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        self.cluster.lock().expect("cluster lock").workers()
    }

    /// The planned fetch times of a feed, if it is planned.
    pub fn feed_spec(&self, feed: &str) -> Option<FeedSpec> {
        self.cluster
            .lock()
            .expect("cluster lock")
            .feeds()
            .get(feed)
            .cloned()
    }

    /// Feeds planned (or with learned state), and the postings a day they were seen to publish in all (over
    /// each feed's watched span in the learning window, at least a day): what the store's
    /// retention window must hold.
    pub fn posting_volume(&self) -> (usize, f64) {
        let now = self.clock.now_ms();
        let window_ms = (self.config().planner.window_days * 86_400_000.0) as i64;
        let planned = self.feeds_planned();
        let feeds = self.feeds.lock().expect("feeds lock");
        let per_day = feeds
            .values()
            .map(|st| {
                let since = st.observed_since_ms.unwrap_or(now).max(now - window_ms);
                let days = ((now - since) as f64 / 86_400_000.0).max(1.0);
                (st.postings_ms.len() + st.spread_ms.len()) as f64 / days
            })
            .sum();
        (planned.max(feeds.len()), per_day)
    }

    /// A copy of a feed's learned state.
    pub fn feed_state(&self, feed: &str) -> Option<FeedState> {
        self.feeds.lock().expect("feeds lock").get(feed).cloned()
    }

    /// Opens a worker session; returns (id, epoch).
    pub fn register(&self, name: &str, capacity: f64) -> Result<(String, u64), ClusterError> {
        let mut c = self.cluster.lock().expect("cluster lock");
        let before = c.moves_total();
        let id = c.register(name, capacity, Instant::now())?;
        m::record_membership(c.workers().len(), c.moves_total() - before);
        tracing::info!(worker = %id, capacity, "worker registered");
        Ok((id, c.epoch()))
    }

    /// The epoch this coordinator's sessions, assignments and reports carry.
    pub fn epoch(&self) -> u64 {
        self.cluster.lock().expect("cluster lock").epoch()
    }

    /// Renews a lease; returns (epoch, version).
    pub fn heartbeat(&self, id: &str, backlog: u64) -> Result<(u64, u64), ClusterError> {
        self.heartbeat_observed(
            id,
            crate::control::cluster::Observed {
                report_backlog: backlog,
                ..Default::default()
            },
        )
    }

    /// [`Hub::heartbeat`] with everything the worker reported of its state.
    pub fn heartbeat_observed(
        &self,
        id: &str,
        observed: crate::control::cluster::Observed,
    ) -> Result<(u64, u64), ClusterError> {
        let mut c = self.cluster.lock().expect("cluster lock");
        let v = c.heartbeat(id, observed, Instant::now())?;
        let workers = c.workers();
        let total: u64 = workers.iter().map(|w| w.report_backlog).sum();
        metrics::gauge!(m::REPORT_BACKLOG).set(total as f64);
        let in_flight: u64 = workers.iter().map(|w| w.in_flight as u64).sum();
        metrics::gauge!(m::WORKER_FETCHES_IN_FLIGHT).set(in_flight as f64);
        // Sessions whose applied assignment trails the desired one.
        let behind = workers
            .iter()
            .filter(|w| w.applied_version < w.version)
            .count();
        metrics::gauge!(m::WORKERS_BEHIND).set(behind as f64);
        Ok((c.epoch(), v))
    }

    /// A session's desired-state channel.
    pub fn subscribe(
        &self,
        id: &str,
    ) -> Result<(u64, tokio::sync::watch::Receiver<Desired>), ClusterError> {
        let c = self.cluster.lock().expect("cluster lock");
        Ok((c.epoch(), c.subscribe(id)?))
    }

    /// An assignment as sent: the spec plus the feed's validators and recent item ids.
    pub fn assignment(&self, spec: &FeedSpec) -> pb::FeedAssignment {
        let feeds = self.feeds.lock().expect("feeds lock");
        let st = feeds.get(&spec.id);
        pb::FeedAssignment {
            feed_id: spec.id.clone(),
            url: spec.url.clone(),
            host: spec.host.clone(),
            fetch_offsets_seconds: spec.offsets_seconds.clone(),
            period_seconds: spec.period_seconds,
            period_origin_unix_ms: spec.origin_unix_ms,
            etag: st.map(|s| s.etag.clone()).unwrap_or_default(),
            last_modified: st.map(|s| s.last_modified.clone()).unwrap_or_default(),
            recent_item_id_hashes: st
                .map(|s| s.recent_items.iter().copied().collect())
                .unwrap_or_default(),
            not_before_unix_ms: spec.not_before_unix_ms,
            skip_hours_mask: spec.skip_hours,
            skip_days_mask: spec.skip_days,
        }
    }

    /// Exports the next hour's planned fetches against the workers' declared capacity (the
    /// autoscaler's signal) and returns it.
    pub fn record_capacity(&self) -> crate::control::capacity::Demand {
        let now = self.clock.now_ms();
        let d = {
            let c = self.cluster.lock().expect("cluster lock");
            let capacity: f64 = c.workers().iter().map(|w| w.capacity).sum();
            crate::control::capacity::next_hour(c.feeds().values(), now, capacity)
        };
        metrics::gauge!(m::PLAN_FETCHES_NEXT_HOUR).set(d.fetches_next_hour as f64);
        metrics::gauge!(m::PLAN_FETCH_RATE_NEXT_HOUR).set(d.fetches_per_second);
        metrics::gauge!(m::WORKERS_CAPACITY).set(d.capacity_per_second);
        metrics::gauge!(m::CAPACITY_UTILIZATION).set(d.utilization());
        d
    }

    /// Drops sessions whose lease ran out (their hosts move to the others).
    pub fn expire_leases(&self) {
        let mut c = self.cluster.lock().expect("cluster lock");
        let before = c.moves_total();
        let gone = c.expire(Instant::now());
        if !gone.is_empty() {
            tracing::warn!(workers = ?gone, "worker leases expired; hosts reassigned");
            m::record_membership(c.workers().len(), c.moves_total() - before);
        }
    }

    /// Records reader access events (from the Ingest service or a worker's relay) and
    /// charges the missed-postings measure later, when the postings are discovered.
    pub fn record_access(
        &self,
        events: &[crate::access::AccessEvent],
    ) -> crate::access::AccessCounts {
        let now = self.clock.now_ms();
        let mut seen: Vec<(&str, i64)> = Vec::new();
        let counts = self
            .access
            .lock()
            .expect("access lock")
            .record_each(events, now, |e| seen.push((&e.user_id, e.unix_ms)));
        m::record_access(&counts);
        if !seen.is_empty() {
            let mut recent = self.recent_access.lock().expect("access lock");
            for (user, t) in &seen {
                let q = recent.entry(user.to_string()).or_default();
                q.push_back(*t);
                if q.len() > ACCESSES_PER_USER {
                    q.pop_front();
                }
            }
            self.totals.lock().expect("totals lock").accesses += seen.len() as u64;
            metrics::counter!(m::ACCESSES_TOTAL).increment(seen.len() as u64);
        }
        counts
    }

    /// Ingests a batch of report messages from session `worker`; answers with the ack.
    pub async fn handle_reports(
        &self,
        worker: &str,
        msgs: Vec<pb::ReportMessage>,
    ) -> Result<pb::ReportAck, IngestError> {
        let mut ack = pb::ReportAck::default();
        let mut accepted = Vec::new();
        let mut accesses = Vec::new();
        {
            let c = self.cluster.lock().expect("cluster lock");
            for msg in msgs {
                ack.acked_seq = ack.acked_seq.max(msg.seq);
                match msg.body {
                    Some(pb::report_message::Body::Fetch(mut r)) => {
                        match checks::check_times(&mut r)
                            .and_then(|()| c.check_owner(worker, &r.feed_id))
                        {
                            Ok(()) => {
                                let postings = r
                                    .new_postings
                                    .iter()
                                    .map(|p| PostingRecord {
                                        item_id_hash: p.item_id_hash,
                                        link: Some(p.link.clone()).filter(|s| !s.is_empty()),
                                        title: Some(p.title.clone()).filter(|s| !s.is_empty()),
                                        published_unix_ms: p.published_unix_ms,
                                        discovered_unix_ms: p.discovered_unix_ms,
                                    })
                                    .collect();
                                accepted.push(Accepted {
                                    report: r,
                                    postings,
                                });
                            }
                            Err(reason) => ack.rejected.push(pb::RejectedReport {
                                seq: msg.seq,
                                reason,
                            }),
                        }
                    }
                    Some(pb::report_message::Body::Accesses(b)) => {
                        accesses.extend(b.events.into_iter().map(|e| crate::access::AccessEvent {
                            user_id: e.user_id,
                            feed_id: e.feed_id,
                            unix_ms: e.unix_ms,
                        }))
                    }
                    None => ack.rejected.push(pb::RejectedReport {
                        seq: msg.seq,
                        reason: "empty report message".into(),
                    }),
                }
            }
        }
        if !accesses.is_empty() {
            self.record_access(&accesses);
        }
        if !ack.rejected.is_empty() {
            tracing::debug!(worker, rejected = ack.rejected.len(), "reports rejected");
            metrics::counter!(m::REPORTS_REJECTED_TOTAL).increment(ack.rejected.len() as u64);
            self.totals.lock().expect("totals lock").reports_rejected += ack.rejected.len() as u64;
        }
        if accepted.is_empty() {
            return Ok(ack);
        }
        let window_ms = (self.cfg.planner.window_days * DAY_MS as f64) as i64;
        let refs: Vec<(&str, &[PostingRecord])> = accepted
            .iter()
            .map(|a| (a.report.feed_id.as_str(), a.postings.as_slice()))
            .collect();
        let mut updated: Vec<(String, FeedState, Vec<i64>, bool)> = Vec::new();
        let mut changes = Vec::new();
        let mut same_slot: Vec<(String, i64)> = Vec::new();
        let (counts, _) = self
            .ingestor
            .ingest_many_with(&refs, |fresh| {
                let feeds = self.feeds.lock().expect("feeds lock");
                let mut next: HashMap<&str, FeedState> = HashMap::new();
                let mut ops = Vec::new();
                for (a, flags) in accepted.iter().zip(fresh) {
                    let feed = a.report.feed_id.as_str();
                    let st = next
                        .entry(feed)
                        .or_insert_with(|| feeds.get(feed).cloned().unwrap_or_default());
                    let o = FetchObservation {
                        finished_ms: a.report.finished_unix_ms,
                        answered: matches!(outcome_label(a.report.outcome), "ok" | "not_modified"),
                        etag: Some(a.report.etag.clone()).filter(|s| !s.is_empty()),
                        last_modified: Some(a.report.last_modified.clone())
                            .filter(|s| !s.is_empty()),
                        new_items: a
                            .postings
                            .iter()
                            .zip(flags)
                            .filter(|(_, &f)| f)
                            .map(|(p, _)| (p.item_id_hash, p.published_unix_ms))
                            .collect(),
                        items_in_document: a.report.items_in_document as usize,
                    };
                    if st.record_slot(a.report.scheduled_unix_ms, worker) {
                        same_slot.push((feed.to_string(), a.report.scheduled_unix_ms));
                    }
                    let observed = st.observe(&o, window_ms);
                    changes.push(st.health.record(
                        health::answer_of(&a.report),
                        a.report.finished_unix_ms,
                        &health::error_of(&a.report),
                        health::hints_of(&a.report),
                    ));
                    updated.push((
                        feed.to_string(),
                        st.clone(),
                        observed.trusted_delays_ms,
                        observed.overflowed,
                    ));
                }
                for (feed, st) in &next {
                    ops.push(Op::Put(
                        Key::Learned(feed).encode()?,
                        serde_json::to_vec(st).expect("feed state serializes"),
                    ));
                }
                Ok(ops)
            })
            .await?;
        // Durable: now the in-memory state and the measures may move.
        if !same_slot.is_empty() {
            tracing::debug!(worker, slots = ?same_slot, "planned slots fetched by a second worker");
            metrics::counter!(m::FETCHES_SAME_SLOT_TOTAL).increment(same_slot.len() as u64);
            self.totals.lock().expect("totals lock").fetches_same_slot += same_slot.len() as u64;
        }
        let mut misses: Vec<(String, i64, i64)> = Vec::new();
        {
            let mut feeds = self.feeds.lock().expect("feeds lock");
            for (feed, st, ..) in &updated {
                feeds.insert(feed.clone(), st.clone());
            }
        }
        for (a, (_, _, delays, overflowed)) in accepted.iter().zip(&updated) {
            let r = &a.report;
            let label = outcome_label(r.outcome);
            if *overflowed {
                m::record_document_overflow();
            }
            m::record_fetch(
                label,
                r.body_bytes,
                (r.started_unix_ms - r.scheduled_unix_ms) as f64 / 1000.0,
            );
            if r.items_unread > 0 {
                metrics::counter!(m::ITEMS_UNREAD_TOTAL).increment(r.items_unread as u64);
            }
            for &d in delays {
                metrics::histogram!(m::POSTING_DELAY_SECONDS).record(d as f64 / 1000.0);
                misses.push((
                    r.feed_id.clone(),
                    r.finished_unix_ms - d,
                    r.finished_unix_ms,
                ));
            }
        }
        let (missed, missed_age_ms) = self.charge_misses(&misses);
        {
            let mut t = self.totals.lock().expect("totals lock");
            for (a, (_, _, delays, _)) in accepted.iter().zip(&updated) {
                t.fetches += 1;
                *t.outcomes
                    .entry(outcome_label(a.report.outcome).to_string())
                    .or_default() += 1;
                *t.fetches_per_feed
                    .entry(a.report.feed_id.clone())
                    .or_default() += 1;
                if matches!(outcome_label(a.report.outcome), "ok" | "not_modified") {
                    t.last_fetch_started
                        .insert(a.report.feed_id.clone(), a.report.started_unix_ms);
                }
                t.bytes = t.bytes.saturating_add(a.report.body_bytes);
                t.delay_count += delays.len() as u64;
                t.delay_sum_ms += delays.iter().map(|&d| d as f64).sum::<f64>();
            }
            t.postings_new += counts.new;
            t.postings_duplicate += counts.duplicates;
            t.missed += missed;
            t.access_delay_sum_ms += missed_age_ms;
        }
        m::record_postings(counts.new, counts.duplicates, missed, missed_age_ms);
        let done: Vec<_> = accepted.iter().map(|a| &a.report).zip(changes).collect();
        self.after_fetches(&done).await;
        Ok(ack)
    }

    /// For postings published at `p` and discovered at `d`, every access of a subscriber in
    /// `[p, d)` missed them: returns (missed postings, summed age at those accesses in ms).
    fn charge_misses(&self, postings: &[(String, i64, i64)]) -> (u64, f64) {
        if postings.is_empty() {
            return (0, 0.0);
        }
        let subs = self.subscribers.lock().expect("subscribers lock");
        let recent = self.recent_access.lock().expect("access lock");
        let (mut n, mut age) = (0u64, 0.0f64);
        for (feed, p, d) in postings {
            for user in subs.get(feed).into_iter().flatten() {
                for &t in recent.get(user).into_iter().flatten() {
                    if t >= *p && t < *d {
                        n += 1;
                        age += (t - p) as f64;
                    }
                }
            }
        }
        (n, age)
    }

    /// One relearn + replan round: models from the learned state, the plan solved on the
    /// blocking pool, and the new fetch times handed to the cluster.
    pub async fn replan(&self) -> anyhow::Result<PlanOutcome> {
        let _round = self.rounds.lock().await;
        let mut feeds = self.registry.all_feeds().await?;
        let states = self.feeds.lock().expect("feeds lock").clone();
        let now = self.clock.now_ms();
        let registered = feeds.len();
        // Gone feeds leave the plan here; the rest carry their back-off and hint bounds.
        let (bounds, caps) = self.plan_bounds(&mut feeds, &states, now);
        let feeds = Arc::new(feeds);
        let (bounds, states) = (Arc::new(bounds), Arc::new(states));
        let mut subs = HashMap::with_capacity(feeds.len());
        for f in feeds.iter() {
            subs.insert(f.id.clone(), self.registry.subscribers(&f.id).await?);
        }
        let users: HashMap<String, f64> = self
            .registry
            .all_users()
            .await?
            .into_iter()
            .map(|u| (u.id, u.weight))
            .collect();
        m::gauge_registry(registered, users.len());
        *self.subscribers.lock().expect("subscribers lock") = subs.clone();
        // Hours the access statistics have watched: the prior's weight falls as they grow.
        let exposure = relearn::hour_exposure(self.access_since_ms, now);
        let access = self.access.clone();
        // The settings of this round and the replanner, taken out of its slot: nothing
        // else needs it while it solves (settings reads and plan inspection have their own
        // copies), and it goes back to the slot from the blocking task itself, so a round
        // whose caller went away still returns it.
        let (generation, settings) = self.settings.lock().expect("settings lock").clone();
        let parked = loop {
            // Empty only while the blocking task of a round whose caller went away is
            // still finishing; it parks the replanner when done.
            if let Some(p) = self.replanner.lock().expect("replanner lock").take() {
                break p;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let mut replanner = parked.replanner;
        if parked.generation != generation {
            replanner.set_settings(settings.clone());
        }
        let (slot, view_slot) = (self.replanner.clone(), self.plan_view.clone());
        let started = Instant::now();
        let (plan_feeds, plan_bounds, plan_states) =
            (feeds.clone(), bounds.clone(), states.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            let (feeds, states) = (plan_feeds, plan_states);
            let stats = access.lock().expect("access lock");
            let observed: Vec<readers::FeedAccess> = feeds
                .iter()
                .map(|f| {
                    let mut a = readers::FeedAccess {
                        observed: vec![0.0f32; 24],
                        subscriber_weight: 0.0,
                    };
                    for u in subs.get(&f.id).into_iter().flatten() {
                        a.subscriber_weight += users.get(u).copied().unwrap_or(0.0);
                        for h in [stats.app_histogram(u), stats.feed_histogram(u, &f.id)]
                            .into_iter()
                            .flatten()
                        {
                            for (b, v) in a.observed.iter_mut().zip(h) {
                                *b += v;
                            }
                        }
                    }
                    a
                })
                .collect();
            drop(stats);
            let rates: HashMap<&str, Vec<f32>> = feeds
                .iter()
                .map(|f| f.id.as_str())
                .zip(readers::access_rates(
                    &observed,
                    &exposure,
                    replanner.settings().shrinkage,
                ))
                .collect();
            let access_bins =
                |feed: &str| -> Vec<f32> { rates.get(feed).cloned().unwrap_or_default() };
            let (replanner, out) = guarded(replanner, |r| {
                let (mut models, counts) =
                    relearn::models(&feeds, &states, &access_bins, now, r.settings());
                let days = r.settings().days_per_period();
                let caps = health::bound_models(&feeds, &mut models, &plan_bounds, &caps, days);
                r.plan_with_caps(&feeds, models, caps).map(|o| (o, counts))
            });
            if out.is_ok() {
                *view_slot.lock().expect("plan view lock") = replanner.view();
            }
            *slot.lock().expect("replanner lock") = Some(Parked {
                generation,
                replanner,
            });
            out.map_err(|e| anyhow::anyhow!("{e}"))
        })
        .await
        .map_err(|e| anyhow::anyhow!("planner task failed: {e}"))??
        .map_err(|e| anyhow::anyhow!("planning failed: {e}"))?;
        let (mut outcome, counts) = outcome;
        let solve = started.elapsed().as_secs_f64();
        let bounds = Arc::try_unwrap(bounds).unwrap_or_else(|b| (*b).clone());
        self.decorate(&mut outcome, &feeds, bounds, &states);
        let posts_per_day: f64 = self
            .feeds
            .lock()
            .expect("feeds lock")
            .values()
            .map(|s| {
                s.observed_postings() as f64
                    / (s.observed_span_ms(now) as f64 / DAY_MS as f64).max(1.0)
            })
            .sum();
        let figures = PlanFigures {
            fetches_per_day: outcome.fetches_per_day,
            budget_per_day: outcome.budget_per_day,
            expected_cost: outcome.expected_cost,
            expected_delay_seconds: if posts_per_day > 0.0 {
                outcome.expected_cost / posts_per_day
            } else {
                0.0
            },
            resolved: outcome.resolved,
            solve_seconds: solve,
            unspent_per_day: outcome.host_limited.unspent_per_day,
            hosts_at_cap: outcome.host_limited.hosts_at_cap,
            host_cap_per_day: settings.host_fetches_per_day,
            capacity_floors: counts.capacity_floors,
            shrinkage_days: counts.shrinkage,
            shrinkage_held_out_days: counts.held_out_days,
            week_shapes: settings.weekly.then_some(counts.week_shapes),
        };
        m::record_plan(&figures);
        warn_unspent(&figures, &outcome);
        {
            let mut c = self.cluster.lock().expect("cluster lock");
            let before = c.moves_total();
            c.set_feeds(outcome.specs.clone());
            m::record_membership(c.workers().len(), c.moves_total() - before);
        }
        let mut t = self.totals.lock().expect("totals lock");
        t.plans += 1;
        t.last_plan = Some(figures);
        Ok(outcome)
    }

    /// Replans every `replan_interval` and expires leases every second until `stop` fires.
    pub async fn run_loops(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut replan = tokio::time::interval(self.cfg.replan_interval);
        let mut leases = tokio::time::interval(Duration::from_millis(500));
        let mut persist = tokio::time::interval(Duration::from_secs(60));
        let mut prune_cursor = crate::retention::Cursor::default();
        let mut prune = tokio::time::interval(self.cfg.retention.every);
        let mut compact = tokio::time::interval(self.cfg.retention.compact_every);
        // A plan's next hour moves with the clock (compressed in demos and tests).
        let mut capacity = tokio::time::interval(Duration::from_secs(15));
        loop {
            tokio::select! {
                _ = persist.tick() => {
                    if let Err(e) = self.persist_access().await {
                        tracing::warn!(error = %e, "access statistics not stored; retrying in a minute");
                    }
                }
                _ = prune.tick() => self.prune_postings(&mut prune_cursor).await,
                _ = compact.tick() => match self.store.compact().await {
                    Ok(Some(rev)) => tracing::info!(revision = rev, "store history compacted"),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "store compaction failed; retrying next interval"),
                },
                _ = replan.tick() => {
                    if let Err(e) = self.replan().await {
                        // Keep the previous plan; the next round tries again.
                        m::record_replan_failure();
                        tracing::error!(error = %e, "replan failed; keeping the previous plan");
                    }
                }
                _ = leases.tick() => self.expire_leases(),
                _ = capacity.tick() => {
                    self.record_capacity();
                }
                _ = stop.changed() => break,
            }
        }
        // What a graceful stop would otherwise lose.
        if let Err(e) = self.persist_access().await {
            tracing::error!(error = %e, "access statistics of the last minute not stored at shutdown");
        }
    }
}

impl<B: KvBackend> Hub<B> {
    /// One retention pass: postings and item markers past their horizon go, at most
    /// [`PRUNE_BUDGET`] index entries per horizon (the rest next minute).
    async fn prune_postings(&self, cursor: &mut crate::retention::Cursor) {
        let now = self.clock.now_ms();
        match self
            .ingestor
            .prune(now, self.cfg.retention, cursor, PRUNE_BUDGET)
            .await
        {
            Ok(p) => {
                m::record_pruned(p.postings, p.markers);
                if p.postings + p.markers > 0 {
                    tracing::info!(
                        postings = p.postings,
                        markers = p.markers,
                        "retention: old postings removed"
                    );
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "retention pass failed; retrying in a minute")
            }
        }
    }
}

/// Discovery index entries a retention pass reads per horizon: 10k feeds posting 10 times
/// a day add about 70 a minute.
const PRUNE_BUDGET: usize = 5_000;

/// A hub for unit tests: sessions that never expire in wall time, hourly replans.
#[cfg(test)]
pub(crate) async fn open_for_tests<B: KvBackend>(store: Arc<B>, clock: SimClock) -> Hub<B> {
    Hub::open(
        store,
        clock,
        HubConfig {
            cluster: ClusterConfig {
                lease: Duration::from_secs(1 << 30),
                ..ClusterConfig::default()
            },
            planner: Default::default(),
            replan_interval: Duration::from_secs(3600),
            health: Default::default(),
            retention: Default::default(),
        },
    )
    .await
    .expect("a hub opens on a test store")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planner_panic_is_an_error_of_the_round_and_leaves_a_usable_replanner() {
        let settings = PlannerSettings {
            slots: 96,
            ..PlannerSettings::default()
        };
        let r = Replanner::new(settings);
        let (r, out) = guarded(r, |_| -> u32 { panic!("boom") });
        let err = out.unwrap_err();
        assert!(err.contains("boom"), "{err}");
        assert_eq!(
            r.settings().slots,
            96,
            "the fresh replanner keeps the settings"
        );
        let (_, out) = guarded(r, |_| 7);
        assert_eq!(out.unwrap(), 7);
    }
}
