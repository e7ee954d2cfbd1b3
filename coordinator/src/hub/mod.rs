//! The live coordinator of one term of leadership: a handle on the control-plane actor
//! (`actor`), which owns the worker sessions, every feed's learned state, the replanner,
//! the access statistics and the totals, and the store I/O around it (registry, postings,
//! learned state).
//!
//! Every call is a named message to the actor and its reply (all of them, with their
//! handlers, in `messages`); no lock guards the live state. The
//! relearn + plan step runs on the blocking pool with the replanner moved out of the state
//! and returns its result as a message, so Admin calls stay fast while a 100k-feed round
//! solves (`benches/admin_latency.rs`). Report ingest writes the postings and the feeds'
//! learned state in one atomic batch, then installs the new state in the actor.

use crate::access::{AccessCounts, AccessEvent, AccessStats};
use crate::control::cluster::{Cluster, ClusterConfig, ClusterError, Desired, WorkerInfo};
use crate::control::feedstate::FeedState;
use crate::control::health::HealthPolicy;
use crate::control::relearn::{PlannerSettings, Replanner};
use crate::control::FeedSpec;
use crate::ingest::Ingestor;
use crate::metrics as m;
use crate::registry::{FeedRecord, OpmlImport, Registry, RegistryError, UserRecord};
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};
use crate::time::DAY_MS;
use actor::{Actor, Parked, State};
use kairos_proto::v1 as pb;
use kairos_runtime::clock::SimClock;
use messages as msg;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod access_state;
mod actor;
mod allowances;
mod checks;
mod figures;
mod health;
mod limits;
mod members;
mod messages;
pub mod open_times;
mod overdue;
mod pacing;
pub mod push;
mod quick;
mod removal;
#[cfg(test)]
mod removal_tests;
mod reports;
mod rounds;
pub mod stored_plan;
#[cfg(test)]
mod test_support;
pub use crate::settings::SettingsRecord;
use crate::settings::{SettingsError, SettingsPatch};
pub use figures::{FeedView, HealthView, PlanFigures, Totals, DAY_OVER_BUDGET};
#[cfg(test)]
pub(crate) use test_support::{open_for_tests, test_runtime};

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
    /// Wall time between two writes of the plan to the store ([`stored_plan`]), which a
    /// new leader serves while its first round solves; `None`: not written.
    pub plan_snapshot_every: Option<Duration>,
    /// Networks a feed URL's IP literal may name besides public addresses (`serve
    /// --allow-private`); others are refused at AddFeed and ImportOpml.
    pub private_allowed: Vec<ipnet::IpNet>,
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

/// The live coordinator: the store side, and the handle on the actor that owns the rest.
pub struct Hub<B> {
    store: Arc<B>,
    registry: Registry<B>,
    ingestor: Arc<Ingestor<B>>,
    actor: Actor,
    /// One settings update at a time, so the stored and the in-force settings agree.
    settings_update: tokio::sync::Mutex<()>,
    /// One round at a time (the periodic loop, the first round at start, tests); held
    /// across the round's awaits, it blocks no thread and no message.
    rounds: tokio::sync::Mutex<()>,
    /// Writers of learned state one at a time (report ingest, ResumeFeed): each reads the
    /// feeds' state from the actor, makes the next state durable, then installs it; a
    /// second writer starting from the same state would undo the first. Ingest is
    /// serialized by the postings' sequence counters anyway, so this costs no throughput.
    learned_writes: tokio::sync::Mutex<()>,
    /// The term's workers as last stored ([`members`]), held while they are written.
    members_saved: tokio::sync::Mutex<Vec<crate::control::cluster::Member>>,
    clock: SimClock,
    /// The term's epoch (the election revision in cluster mode).
    epoch: u64,
    /// Since when the reader access statistics have been collected (survives restarts).
    access_since_ms: i64,
    /// The stored plan this term started on (feeds served, when it was written), if any.
    started_on: Option<(usize, i64)>,
    /// Feeds registered when the term began (before its first round has planned them).
    registered_at_open: usize,
    /// How long reading the store took at the term's start.
    open_times: OpenTimes,
    cfg: HubConfig,
}

pub use open_times::OpenTimes;

impl<B: KvBackend> Hub<B> {
    /// Loads the registry, access statistics and learned state from `store`, and starts
    /// the control-plane actor on them (it lives as long as the hub).
    pub async fn open(store: Arc<B>, clock: SimClock, cfg: HubConfig) -> anyhow::Result<Self> {
        cfg.planner
            .validate()
            .map_err(|e| anyhow::anyhow!("planner settings: {e}"))?;
        let registry =
            Registry::new(store.clone()).with_private_allowed(cfg.private_allowed.clone());
        let started = std::time::Instant::now();
        let mut mark = started;
        let mut lap = move || {
            let now = std::time::Instant::now();
            (now - std::mem::replace(&mut mark, now), now - started)
        };
        let mut access = AccessStats::new(24, DAY_MS);
        let (users, feeds) = (registry.all_users().await?, registry.all_feeds().await?);
        let registry_took = lap().0;
        for u in &users {
            access.set_user(&u.id, u.weight as f32);
        }
        for f in &feeds {
            access.set_feed(&f.id);
        }
        m::gauge_registry(feeds.len(), users.len());
        let index = registry.index_urls(&feeds).await?;
        if index.indexed > 0 {
            tracing::info!(feeds = index.indexed, "feed URLs entered in the URL index");
        }
        if let Some((feed, earlier)) = index.duplicates.first() {
            // Registered before the index existed; each is fetched on its own.
            tracing::warn!(
                feeds = index.duplicates.len(),
                example = %feed,
                same_url_as = %earlier,
                "feeds share a URL with another registered feed and are fetched twice; remove one of each pair"
            );
        }
        let url_index_took = lap().0;
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
                        learned.insert(feed, Arc::new(st));
                    }
                    // Relearnable: drop it rather than refuse to start.
                    Err(e) => tracing::warn!(%feed, error = %e, "unreadable learned state skipped"),
                }
            }
        }
        // State learned for feeds no longer registered (removed before their removal took
        // the state with it, or while a report of theirs was in flight) is dropped here and
        // deleted from the store, so it neither loads at every start nor grows for ever.
        let registered: std::collections::HashSet<&str> =
            feeds.iter().map(|f| f.id.as_str()).collect();
        let orphans: Vec<String> = learned
            .keys()
            .filter(|f| !registered.contains(f.as_str()))
            .cloned()
            .collect();
        for f in &orphans {
            learned.remove(f);
        }
        let keys = orphans
            .iter()
            .map(|f| Key::Learned(f).encode())
            .collect::<Result<Vec<_>, _>>()?;
        delete_leftovers(store.as_ref(), keys, "learned state of feeds").await;
        let learned_took = lap().0;
        tracing::info!(
            feeds = feeds.len(),
            users = users.len(),
            learned = learned.len(),
            registry_s = registry_took.as_secs_f64(),
            url_index_s = url_index_took.as_secs_f64(),
            learned_s = learned_took.as_secs_f64(),
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
                .and_then(|r| r.apply(&planner).map_err(|e| e.to_string()))
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
        access_state::repair_once(store.as_ref(), &registry, &mut access).await?;
        let host_limits = crate::host_limits::all(store.as_ref())
            .await?
            .into_iter()
            .map(|l| (l.host, l.max_fetches_per_day))
            .collect();
        // The last plan stored: workers get fetch times from it at once, while the first
        // round solves (a failover at 100k feeds would otherwise wait for the round).
        let before_plan = lap().0;
        let stored = match stored_plan::load(store.as_ref(), &feeds).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "stored plan not read; the first round plans before serving");
                None
            }
        };
        let plan_took = lap().0;
        let mut cluster = Cluster::new(cfg.cluster.clone(), epoch);
        let last_members = members::load(store.as_ref(), &mut cluster).await?;
        let (mut budget_per_day, mut first_sights, mut started_on) = (None, HashMap::new(), None);
        let mut promises = Default::default();
        let mut replanner = Replanner::new(planner.clone());
        if let Some((meta, specs)) = stored {
            // A weekly plan's first rounds start from the predecessor's days' prices, not
            // unpriced: those would ask the weekdays more than their allowances.
            if !meta.day_prices.is_empty() {
                if replanner.resume_day_prices(meta.day_pricing()) {
                    tracing::info!(prices = ?meta.day_prices, "the stored plan's day prices taken up");
                } else {
                    tracing::warn!(
                        prices = ?meta.day_prices,
                        "the stored plan's day prices do not fit this period or are not valid; the first rounds step them afresh"
                    );
                }
            }
            // The predecessor's record goes on, so the promise does not fall back to the
            // model's own figure for days after a failover.
            promises = match meta.promises.map(|r| r.checked(clock.now_ms())) {
                Some(Some(r)) => r,
                Some(None) => {
                    tracing::warn!("the stored plans' record is not one this coordinator could have written; starting a new one");
                    Default::default()
                }
                None => Default::default(),
            };
            tracing::info!(
                feeds = specs.len(),
                registered = feeds.len(),
                written_at_ms = meta.written_at_ms,
                generation = meta.generation,
                "serving the stored plan until the first round ends"
            );
            for s in specs.values() {
                if s.first_fetch_unix_ms > 0 && !learned.contains_key(&s.id) {
                    first_sights.insert(s.id.clone(), s.first_fetch_unix_ms);
                }
            }
            started_on = Some((specs.len(), meta.written_at_ms));
            budget_per_day = Some(meta.per_day);
            cluster.set_feeds(specs);
        }
        m::gauge_plan_from_store(started_on.is_some());
        let (rest, total) = lap();
        let open_times = OpenTimes {
            registry: registry_took,
            url_index: url_index_took,
            learned: learned_took,
            plan: plan_took,
            rest: before_plan + rest,
            total,
        };
        m::gauge_leader_open(&open_times.phases());
        tracing::info!(
            total_s = total.as_secs_f64(),
            plan_s = plan_took.as_secs_f64(),
            "store read; the term can serve"
        );
        let actor = Actor::spawn(State {
            cluster,
            feeds: learned,
            subscribers: HashMap::new(),
            recent_access: HashMap::new(),
            access,
            settings: (0, planner.clone()),
            replanner: Some(Parked {
                generation: 0,
                replanner,
            }),
            plan_view: Arc::default(),
            throttles: Default::default(),
            host_limits,
            bounds: Default::default(),
            totals: Totals::default(),
            promises,
            first_sights,
            removed: HashMap::new(),
            paced_day: Default::default(),
            budget_per_day,
            quick: Default::default(),
            days_over: Default::default(),
            push: Default::default(),
        });
        Ok(Hub {
            store: store.clone(),
            registry,
            ingestor: Arc::new(Ingestor::new(store).with_marker_retention(cfg.retention.markers)),
            actor,
            settings_update: tokio::sync::Mutex::new(()),
            rounds: tokio::sync::Mutex::new(()),
            learned_writes: tokio::sync::Mutex::new(()),
            members_saved: tokio::sync::Mutex::new(last_members),
            epoch,
            access_since_ms,
            started_on,
            registered_at_open: feeds.len(),
            open_times,
            clock,
            cfg,
        })
    }

    /// How long [`Self::open`] spent on each part of the store.
    pub fn open_times(&self) -> OpenTimes {
        self.open_times
    }

    /// The stored plan this term started serving (feeds in it, when it was written, Unix
    /// ms), if one was read: the first round can then run after serving starts.
    pub fn started_on_stored_plan(&self) -> Option<(usize, i64)> {
        self.started_on
    }

    /// The stored plan this term serves until its own first round is installed: the feeds
    /// it covers and when it was written; `None` once this leader has planned (or when it
    /// started without one).
    pub async fn serving_stored_plan(&self) -> Option<(usize, i64)> {
        let started_on = self.started_on?;
        let plans = self.actor.ask(msg::PlansMade).await;
        (plans == 0).then_some(started_on)
    }

    /// The clock everything is timed by.
    pub fn clock(&self) -> SimClock {
        self.clock
    }

    /// The settings.
    pub fn config(&self) -> &HubConfig {
        &self.cfg
    }

    /// The registry, for reads and subscriptions. Adding and removing feeds and users goes
    /// through the hub ([`Hub::add_feed`] and the rest), which keeps the access statistics
    /// in step.
    pub fn registry(&self) -> &Registry<B> {
        &self.registry
    }

    /// The postings store.
    pub fn ingestor(&self) -> &Arc<Ingestor<B>> {
        &self.ingestor
    }

    /// A copy of the running totals.
    pub async fn totals(&self) -> Totals {
        self.actor.ask(msg::GetTotals).await
    }

    /// The planner settings in force.
    pub async fn settings(&self) -> PlannerSettings {
        self.actor.ask(msg::GetSettings).await
    }

    /// The planner settings in force and the feeds in the current plan, in one message.
    pub async fn settings_and_feeds_planned(&self) -> (PlannerSettings, usize) {
        self.actor.ask(msg::SettingsAndFeedsPlanned).await
    }

    /// Applies `patch` to the settings in force, validates, stores and installs the
    /// result ([`crate::settings`]); the next round replans every feed with it.
    pub async fn update_settings(
        &self,
        patch: &SettingsPatch,
    ) -> Result<PlannerSettings, SettingsError> {
        let _one_at_a_time = self.settings_update.lock().await;
        let next = patch.apply(&self.settings().await)?;
        let unavailable = |e: &dyn std::fmt::Display| SettingsError::Unavailable(e.to_string());
        // A total budget below what the per-feed minimums of the feeds registered now need
        // would make every replan fail while the setting stayed in force.
        let feeds = self
            .registry
            .all_feeds()
            .await
            .map_err(|e| unavailable(&e))?
            .len();
        let (min_level, _) = next.levels();
        let needed =
            feeds as f64 * crate::plan::alloc::level_rate(min_level) / next.days_per_period();
        let budget = next.budget.per_day(feeds);
        if feeds > 0 && budget < needed * (1.0 - 1e-9) {
            return Err(SettingsError::Invalid(format!(
                "a budget of {budget} fetches per day is below the {needed:.3} that the minimum of {} fetches per feed per day needs for the {feeds} registered feeds",
                next.min_fetches_per_day
            )));
        }
        let key = Key::Settings.encode().map_err(|e| unavailable(&e))?;
        let value = serde_json::to_vec(&SettingsRecord::of(&next)).expect("settings serialize");
        self.store
            .batch(vec![Op::Put(key, value)])
            .await
            .map_err(|e| unavailable(&e))?;
        self.actor.ask(msg::InstallSettings(next.clone())).await;
        tracing::info!(settings = ?SettingsRecord::of(&next), "planner settings updated");
        Ok(next)
    }

    /// A feed's learned model and plan from the last round.
    pub async fn inspect(&self, feed: &str) -> Option<FeedView> {
        self.actor
            .ask(msg::Inspect {
                feed: feed.to_string(),
                now_ms: self.clock.now_ms(),
                policy: self.cfg.health.clone(),
            })
            .await
    }

    /// The expected delay per posting (seconds) of each of `feeds`' plans in force, in
    /// order (NaN: not planned): what the plans promise each feed's postings.
    pub async fn expected_delays(&self, feeds: Arc<Vec<String>>) -> Vec<f64> {
        self.actor.ask(msg::ExpectedDelays(feeds)).await
    }

    /// A feed's fetch health.
    pub async fn feed_health(&self, feed: &str) -> HealthView {
        self.feed_health_many(vec![feed.to_string()])
            .await
            .pop()
            .unwrap_or_default()
    }

    /// The fetch health of each of `feeds`, in order, in one message.
    pub async fn feed_health_many(&self, feeds: Vec<String>) -> Vec<HealthView> {
        self.actor
            .ask(msg::FeedHealth {
                feeds,
                now_ms: self.clock.now_ms(),
                policy: self.cfg.health.clone(),
            })
            .await
    }

    /// Subscriptions known at the last replan.
    pub async fn subscriptions(&self) -> usize {
        self.actor.ask(msg::Subscriptions).await
    }

    /// Feeds in the current plan.
    pub async fn feeds_planned(&self) -> usize {
        self.actor.ask(msg::FeedsPlanned).await
    }

    /// Live worker sessions.
    pub async fn workers(&self) -> Vec<WorkerInfo> {
        self.actor.ask(msg::Workers).await
    }

    /// The planned fetch times of a feed, if it is planned.
    pub async fn feed_spec(&self, feed: &str) -> Option<FeedSpec> {
        let mut one = self.feed_specs(vec![feed.to_string()]).await;
        one.pop().flatten()
    }

    /// The planned fetch times of each of `feeds`, in order, in one message.
    pub async fn feed_specs(&self, feeds: Vec<String>) -> Vec<Option<FeedSpec>> {
        self.actor.ask(msg::FeedSpecs(feeds)).await
    }

    /// The daily allowance dealt to worker session `worker`, as its assignment carries it.
    pub async fn allowance(&self, worker: &str) -> Option<kairos_runtime::allowance::Allowance> {
        self.actor
            .ask(msg::Allowance {
                session: worker.to_string(),
            })
            .await
    }

    /// Feeds planned, registered when the term began, or with learned state (whichever is
    /// most: a leader serving a stored plan has not planned the feeds added since), and the
    /// postings a day they were seen to publish in all (over each feed's watched span in the learning window, at least a
    /// day): what the store's retention window must hold.
    pub async fn posting_volume(&self) -> (usize, f64) {
        self.actor
            .ask(msg::PostingVolume {
                now_ms: self.clock.now_ms(),
                window_ms: (self.cfg.planner.window_days * DAY_MS as f64) as i64,
                registered_at_open: self.registered_at_open,
            })
            .await
    }

    /// A copy of a feed's learned state.
    pub async fn feed_state(&self, feed: &str) -> Option<FeedState> {
        self.actor.ask(msg::LearnedState(feed.to_string())).await
    }

    /// The learned states of those of `feeds` that have one, shared, in one message.
    pub async fn feed_states(&self, feeds: Vec<String>) -> HashMap<String, Arc<FeedState>> {
        self.actor.ask(msg::LearnedStates(feeds)).await.0
    }

    /// Opens a worker session; returns (id, epoch).
    pub async fn register(&self, name: &str, capacity: f64) -> Result<(String, u64), ClusterError> {
        let registered = self
            .actor
            .ask(msg::RegisterWorker {
                name: name.to_string(),
                capacity,
                now_ms: self.clock.now_ms(),
            })
            .await;
        if registered.is_ok() {
            self.save_members().await;
        }
        registered
    }

    /// The epoch this coordinator's sessions, assignments and reports carry (fixed for the
    /// term).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Renews a lease; returns (epoch, version).
    pub async fn heartbeat(&self, id: &str, backlog: u64) -> Result<(u64, u64), ClusterError> {
        self.heartbeat_observed(
            id,
            crate::control::cluster::Observed {
                report_backlog: backlog,
                ..Default::default()
            },
        )
        .await
    }

    /// [`Hub::heartbeat`] with everything the worker reported of its state.
    pub async fn heartbeat_observed(
        &self,
        id: &str,
        observed: crate::control::cluster::Observed,
    ) -> Result<(u64, u64), ClusterError> {
        self.actor
            .ask(msg::Heartbeat {
                session: id.to_string(),
                observed,
            })
            .await
    }

    /// A session's desired-state channel.
    pub async fn subscribe(
        &self,
        id: &str,
    ) -> Result<(u64, tokio::sync::watch::Receiver<Desired>), ClusterError> {
        self.actor
            .ask(msg::Subscribe {
                session: id.to_string(),
            })
            .await
    }

    /// Assignments as sent: each spec plus its feed's validators and recent item ids, in
    /// one message for the whole list.
    pub async fn assignments(&self, specs: Vec<FeedSpec>) -> Vec<pb::FeedAssignment> {
        self.actor.ask(msg::Assignments(specs)).await
    }

    /// Exports the next hour's planned fetches against the workers' declared capacity (the
    /// autoscaler's signal) and returns it.
    pub async fn record_capacity(&self) -> crate::control::capacity::Demand {
        let now_ms = self.clock.now_ms();
        let d = self.actor.ask(msg::NextHourDemand { now_ms }).await;
        metrics::gauge!(m::PLAN_FETCHES_NEXT_HOUR).set(d.fetches_next_hour as f64);
        metrics::gauge!(m::PLAN_FETCH_RATE_NEXT_HOUR).set(d.fetches_per_second);
        metrics::gauge!(m::PLAN_FETCHES_BUSIEST_MINUTE).set(d.busiest_minute as f64);
        metrics::gauge!(m::WORKERS_CAPACITY).set(d.capacity_per_second);
        metrics::gauge!(m::CAPACITY_UTILIZATION).set(d.utilization());
        d
    }

    /// Drops sessions whose lease ran out (their hosts move to the others).
    pub async fn expire_leases(&self) {
        let now_ms = self.clock.now_ms();
        self.actor.ask(msg::ExpireLeases { now_ms }).await;
        self.stop_awaiting().await;
        self.save_members().await;
    }

    /// Ends session `id` at the worker's word (it drained and is stopping): its hosts go
    /// to the other workers now instead of when its lease runs out. Returns whether the
    /// session was live.
    pub async fn leave(&self, id: &str) -> bool {
        let now_ms = self.clock.now_ms();
        let left = self
            .actor
            .ask(msg::Leave {
                session: id.to_string(),
                now_ms,
            })
            .await;
        if left {
            self.save_members().await;
        }
        left
    }

    /// Records reader access events (from the Ingest service or a worker's relay),
    /// skipping and counting the ones that cannot be, and charges the missed-postings
    /// measure later, when the postings are discovered.
    pub async fn record_access(&self, events: Vec<AccessEvent>) -> AccessCounts {
        let now_ms = self.clock.now_ms();
        self.actor.ask(msg::RecordAccess { events, now_ms }).await
    }

    /// Records every event of `events` or, when any of them cannot be recorded (unknown
    /// user or feed, outside the accepted window), none; the counts say why. Checked and
    /// recorded in one message, so a user removed meanwhile cannot slip in between.
    pub async fn record_access_all_or_none(
        &self,
        events: Vec<AccessEvent>,
    ) -> Result<AccessCounts, AccessCounts> {
        let now_ms = self.clock.now_ms();
        self.actor
            .ask(msg::RecordAccessAllOrNone { events, now_ms })
            .await
    }

    /// Registers a feed (and in the access statistics).
    pub async fn add_feed(
        &self,
        id: Option<&str>,
        url: &str,
        weight: f64,
    ) -> Result<FeedRecord, RegistryError> {
        let added = self.registry.add_feed(id, url, weight).await?;
        self.actor.ask(msg::FeedAdded(added.id.clone())).await;
        metrics::gauge!(m::REGISTRY_FEEDS).increment(1.0);
        Ok(added)
    }

    /// Registers a user (and in the access statistics).
    pub async fn add_user(&self, id: &str, weight: f64) -> Result<UserRecord, RegistryError> {
        let added = self.registry.add_user(id, weight).await?;
        self.actor
            .ask(msg::UserAdded {
                id: added.id.clone(),
                weight: added.weight as f32,
            })
            .await;
        metrics::gauge!(m::REGISTRY_USERS).increment(1.0);
        Ok(added)
    }

    /// Imports an OPML document (optionally subscribing `user` to its feeds); the feeds it
    /// added are new to the access statistics as well.
    pub async fn import_opml(
        &self,
        opml: &str,
        user: Option<&str>,
    ) -> Result<OpmlImport, RegistryError> {
        let got = self.registry.import_opml(opml, user).await?;
        self.actor
            .ask(msg::FeedsImported(got.added_ids.clone()))
            .await;
        metrics::gauge!(m::REGISTRY_FEEDS).increment(got.added_ids.len() as f64);
        Ok(got)
    }

    /// Runs `f` on the actor's state (tests look inside).
    #[cfg(test)]
    async fn with_state<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State) -> T + Send + 'static,
    ) -> T {
        self.actor.run_for_test(f).await
    }
}

/// An assignment as sent: the spec plus the feed's validators, recent item ids and last
/// answered fetch.
fn assignment(spec: FeedSpec, st: Option<&FeedState>) -> pb::FeedAssignment {
    pb::FeedAssignment {
        last_fetch_unix_ms: st.and_then(|s| s.last_answered_ms).unwrap_or(0),
        // The first answered fetch is the first sight (the coordinator expedites it).
        last_fetch_first_sight: st.is_some_and(|s| s.fetches == 1),
        etag: st.map(|s| s.etag.clone()).unwrap_or_default(),
        last_modified: st.map(|s| s.last_modified.clone()).unwrap_or_default(),
        recent_item_id_hashes: st
            .map(|s| s.recent_items.iter().copied().collect())
            .unwrap_or_default(),
        feed_id: spec.id,
        url: spec.url,
        host: spec.host,
        fetch_offsets_seconds: spec.offsets_seconds,
        period_seconds: spec.period_seconds,
        period_origin_unix_ms: spec.origin_unix_ms,
        not_before_unix_ms: spec.not_before_unix_ms,
        first_fetch_unix_ms: spec.first_fetch_unix_ms,
        skip_hours_mask: spec.skip_hours,
        skip_days_mask: spec.skip_days,
        timed: spec.timed,
    }
}

/// Writes per batch where the hub writes or deletes many records at once: under etcd's
/// default limit of 128 operations a request.
const STORE_BATCH: usize = 100;

/// Deletes records a hub's start found left over (`what`: whose, for the log), in batches
/// of [`STORE_BATCH`]; returns how many went. A failed batch stops it, said once with how
/// many are left: they are not loaded all the same, and the next start tries again.
async fn delete_leftovers<B: KvBackend + ?Sized>(
    store: &B,
    keys: Vec<Vec<u8>>,
    what: &str,
) -> usize {
    if keys.is_empty() {
        return 0;
    }
    let mut deleted = 0;
    for chunk in keys.chunks(STORE_BATCH) {
        match store
            .batch(chunk.iter().cloned().map(Op::Delete).collect())
            .await
        {
            Ok(()) => deleted += chunk.len(),
            Err(e) => {
                tracing::warn!(error = %e, left = keys.len() - deleted, "could not delete the {what} no longer registered");
                break;
            }
        }
    }
    tracing::info!(
        records = keys.len(),
        deleted,
        "{what} no longer registered dropped"
    );
    deleted
}
