//! Worker sessions, host ownership and each worker's desired state.
//!
//! A worker registers with a name and a capacity and gets a session id and a lease; every
//! heartbeat renews the lease, and a session whose lease ran out is dropped. Whenever the
//! membership or the set of hosts changes, hosts are re-dealt by capacity-weighted
//! rendezvous hashing with bounded load ([`crate::shard`]), keyed by the worker's name, not its
//! session: a worker that registers again, with this coordinator or with the next leader,
//! gets the hosts it had. A plan that only changes fetch times keeps the owners, so replans
//! never move hosts; nor does a worker coming back under its name at the same capacity
//! (restarted, or awaited after a failover): it takes its hosts and nothing else is dealt
//! again, since a deal by the loads of a later plan would spill other hosts differently.
//! When hosts are dealt again (a worker joins or leaves, the set of hosts changes), a host
//! the load bound spilled past its first-ranked worker stays where it went while that
//! worker has room ([`crate::shard::assign_keeping`]), for the same reason.
//!
//! A new term starts from the workers the last one had ([`Member`], kept in the store, with
//! the hosts the bound spilled to each): until each has registered again, or two worker
//! leases have passed, their places in the hashing are held and their hosts dealt to
//! nobody; the first deal keeps the last term's spilled hosts where they were, so its
//! loads, which are not the last leader's, move none that still fit. A worker keeps
//! fetching its last assignment while it looks for the new leader, so dealing its hosts to
//! the first worker that arrives would fetch the same planned slots twice. Each session's
//! desired state (its feeds with their fetch times) carries a version that grows by one per
//! change and is published on a `watch` channel: the assignment stream sends the first
//! value it sees as a snapshot and the difference between consecutive values as deltas, and
//! a slow stream simply skips intermediate versions.
//!
//! Time is an argument (`Instant`), so tests drive leases directly.

use super::FeedSpec;
use kairos_runtime::allowance::Allowance;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A worker's desired state at one version.
#[derive(Clone, Debug, Default)]
pub struct Desired {
    /// Version, starting at 1 for a session's first state.
    pub version: u64,
    /// Feeds the worker should fetch, by id.
    pub feeds: Arc<BTreeMap<String, FeedSpec>>,
    /// The most fetches the worker may start per UTC day (`None`: not dealt yet).
    pub allowance: Option<Allowance>,
}

/// Deals the day's budget over the sessions: (session id, its feeds) → allowance.
pub type Dealer<'a> =
    &'a dyn Fn(&[(&str, &BTreeMap<String, FeedSpec>)]) -> HashMap<String, Allowance>;

/// Why a cluster call was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    /// The session id is unknown or its lease expired (`NOT_FOUND`: register again).
    #[error("unknown or expired worker session `{0}`; register again")]
    UnknownWorker(String),
    /// Bad registration (`INVALID_ARGUMENT`).
    #[error("invalid registration: {0}")]
    InvalidArgument(String),
}

/// Lease and load-bound settings.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// How long a session lives without a heartbeat.
    pub lease: Duration,
    /// Heartbeat interval asked of workers.
    pub heartbeat: Duration,
    /// Load bound of the sharding (`ε ≥ 1`).
    pub epsilon: f64,
    /// The epoch sessions, assignments and reports carry: the leader's election revision in
    /// cluster mode; `None` takes the wall clock's seconds at start (a restarted
    /// coordinator's epoch is larger than its predecessor's either way).
    pub epoch: Option<u64>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            lease: Duration::from_secs(10),
            heartbeat: Duration::from_secs(2),
            epsilon: 1.25,
            epoch: None,
        }
    }
}

/// The worker name of a session id (`name#n`).
pub fn name_of(session: &str) -> &str {
    session.rsplit_once('#').map_or(session, |(name, _)| name)
}

/// A worker session as listed to operators.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerInfo {
    /// Session id.
    pub id: String,
    /// Name the worker registered with.
    pub name: String,
    /// Declared capacity.
    pub capacity: f64,
    /// Hosts owned.
    pub hosts: usize,
    /// Feeds assigned.
    pub feeds: usize,
    /// Version of its desired state.
    pub version: u64,
    /// Report backlog from its last heartbeat.
    pub report_backlog: u64,
    /// Fetches in flight, from its last heartbeat.
    pub in_flight: u32,
    /// Assignment version it last applied, from its last heartbeat.
    pub applied_version: u64,
    /// Its clock minus the coordinator's at its last heartbeat, when it said.
    pub clock_offset_ms: Option<i64>,
    /// Last heartbeat (or registration), Unix ms of the wall clock.
    pub last_heartbeat_unix_ms: i64,
}

/// What the live sessions report together, for the workers' gauges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionFigures {
    /// Fetch reports the workers hold, not yet sent.
    pub report_backlog: u64,
    /// Fetches in flight.
    pub in_flight: u64,
    /// Sessions whose applied assignment trails the desired one.
    pub behind: usize,
    /// The largest clock offset from the coordinator's, either way, ms.
    pub max_clock_offset_ms: u64,
}

impl SessionFigures {
    /// The figures of these sessions.
    pub fn of(workers: &[WorkerInfo]) -> Self {
        SessionFigures {
            report_backlog: workers.iter().map(|w| w.report_backlog).sum(),
            in_flight: workers.iter().map(|w| w.in_flight as u64).sum(),
            behind: workers
                .iter()
                .filter(|w| w.applied_version < w.version)
                .count(),
            max_clock_offset_ms: workers
                .iter()
                .filter_map(|w| w.clock_offset_ms)
                .map(i64::unsigned_abs)
                .max()
                .unwrap_or(0),
        }
    }
}

/// What a worker reported of itself in its last heartbeat (its observed state, next to
/// the desired state the coordinator holds for it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Observed {
    /// Reports not yet acknowledged.
    pub report_backlog: u64,
    /// Fetches running.
    pub in_flight: u32,
    /// Version of the last assignment it applied (0 until it applied one).
    pub applied_version: u64,
    /// Its clock minus the coordinator's, when it said what its clock read.
    pub clock_offset_ms: Option<i64>,
}

struct Session {
    name: String,
    capacity: f64,
    lease_until: Instant,
    tx: watch::Sender<Desired>,
    observed: Observed,
    /// Whether its clock is off now, as last said in the log (said once per change).
    clock_off: bool,
}

/// A worker clock further than this from the coordinator's is logged and shown: fetch
/// times are the coordinator's, so a worker off by this fetches off by as much.
pub const CLOCK_OFFSET_WARN_MS: i64 = 30_000;

/// Sessions, owners and desired states.
pub struct Cluster {
    cfg: ClusterConfig,
    epoch: u64,
    next_id: u64,
    sessions: BTreeMap<String, Session>,
    feeds: BTreeMap<String, FeedSpec>,
    /// The hosts of `feeds`.
    hosts: Arc<BTreeSet<String>>,
    /// Host → owning session id (shared with [`ShardView`]s; replaced, never edited).
    owner: Arc<HashMap<String, String>>,
    /// Hosts that changed owner since start (joins, leaves, expired leases).
    moves_total: u64,
    /// Workers of the last term not registered again yet (name → capacity): their places
    /// in the hashing are held, their hosts owned by nobody.
    awaited: BTreeMap<String, f64>,
    /// Host → awaited worker's name: the hosts held for it, which it gets when it registers.
    held: HashMap<String, String>,
    /// Host → the name of its first-ranked worker, for the hosts the load bound spilled to
    /// another (owned or held).
    spilled_from: HashMap<String, String>,
    /// The last term's spilled hosts (host → [its worker's name, its first-ranked worker's
    /// name]), kept by the deals of this term until each host is dealt.
    inherited: HashMap<String, [String; 2]>,
    /// How long `awaited` is held, counted from the first lease check.
    awaiting_for: Duration,
    /// Until when `awaited` is held (set by the first lease check).
    awaiting_until: Option<Instant>,
    /// Bumped by every change of sessions, owners or desired states, so a plan prepared
    /// against a [`ShardView`] is installed only onto the cluster it was prepared for.
    generation: u64,
}

/// What a plan's desired states are computed against away from the cluster: the owners,
/// the hosts, and each session's current desired state, at one generation.
#[derive(Clone)]
pub struct ShardView {
    generation: u64,
    hosts: Arc<BTreeSet<String>>,
    owner: Arc<HashMap<String, String>>,
    current: Vec<(String, Desired)>,
}

/// A plan's desired states, prepared against a [`ShardView`] (see [`Cluster::install`]).
pub struct Prepared {
    generation: u64,
    feeds: BTreeMap<String, FeedSpec>,
    hosts: Arc<BTreeSet<String>>,
    /// Sessions whose desired state changes, with the new one.
    changed: Vec<(String, Desired)>,
}

/// What an installation replaced, to be dropped away from the caller (freeing 100k specs
/// takes a while).
pub struct Replaced {
    _feeds: BTreeMap<String, FeedSpec>,
    _desired: Vec<Desired>,
}

impl ShardView {
    /// The desired states `feeds` give each session, computed here rather than on the
    /// cluster. `None` when the plan's hosts differ from the cluster's: the hosts must be
    /// re-dealt, which [`Cluster::set_feeds`] does.
    pub fn prepare(
        &self,
        feeds: BTreeMap<String, FeedSpec>,
        deal: Dealer,
    ) -> Result<Prepared, BTreeMap<String, FeedSpec>> {
        let hosts: BTreeSet<String> = feeds.values().map(|f| f.host.clone()).collect();
        if hosts != *self.hosts {
            return Err(feeds);
        }
        let mut per_worker: HashMap<&str, BTreeMap<String, FeedSpec>> = HashMap::new();
        for f in feeds.values() {
            if let Some(w) = self.owner.get(&f.host) {
                per_worker
                    .entry(w.as_str())
                    .or_default()
                    .insert(f.id.clone(), f.clone());
            }
        }
        let mine: Vec<(&str, BTreeMap<String, FeedSpec>)> = self
            .current
            .iter()
            .map(|(id, _)| {
                let feeds = per_worker.remove(id.as_str()).unwrap_or_default();
                (id.as_str(), feeds)
            })
            .collect();
        let refs: Vec<(&str, &BTreeMap<String, FeedSpec>)> =
            mine.iter().map(|(id, f)| (*id, f)).collect();
        let mut allowances = deal(&refs);
        let changed = self
            .current
            .iter()
            .zip(mine)
            .filter_map(|((id, current), (_, mine))| {
                let allowance = allowances.remove(id);
                (current.version == 0 || *current.feeds != mine || current.allowance != allowance)
                    .then(|| {
                        (
                            id.clone(),
                            Desired {
                                version: current.version + 1,
                                feeds: Arc::new(mine),
                                allowance,
                            },
                        )
                    })
            })
            .collect();
        Ok(Prepared {
            generation: self.generation,
            feeds,
            hosts: Arc::new(hosts),
            changed,
        })
    }
}

impl Cluster {
    /// An empty cluster at `epoch` (a restarted coordinator must use a larger one).
    pub fn new(cfg: ClusterConfig, epoch: u64) -> Self {
        Cluster {
            cfg,
            epoch,
            next_id: 1,
            sessions: BTreeMap::new(),
            feeds: BTreeMap::new(),
            hosts: Arc::default(),
            owner: Arc::default(),
            moves_total: 0,
            awaited: BTreeMap::new(),
            held: HashMap::new(),
            spilled_from: HashMap::new(),
            inherited: HashMap::new(),
            awaiting_for: Duration::ZERO,
            awaiting_until: None,
            generation: 0,
        }
    }

    /// What a plan's desired states can be prepared against away from the cluster (cheap:
    /// shared pointers and one entry per session).
    pub fn shard_view(&self) -> ShardView {
        ShardView {
            generation: self.generation,
            hosts: self.hosts.clone(),
            owner: self.owner.clone(),
            current: self
                .sessions
                .iter()
                .map(|(id, s)| (id.clone(), s.tx.borrow().clone()))
                .collect(),
        }
    }

    /// Installs a plan prepared against [`Cluster::shard_view`]: the same as
    /// [`Cluster::set_feeds`] when nothing changed in between, at the cost of a few pointer
    /// moves. When sessions, owners or desired states changed since the view was taken, the
    /// plan is installed the slow way. Returns what was replaced, for the caller to drop.
    pub fn install(&mut self, p: Prepared) -> Replaced {
        if p.generation != self.generation {
            self.set_feeds(p.feeds);
            return Replaced {
                _feeds: BTreeMap::new(),
                _desired: Vec::new(),
            };
        }
        let old = std::mem::replace(&mut self.feeds, p.feeds);
        self.hosts = p.hosts;
        let mut desired = Vec::with_capacity(p.changed.len());
        for (id, d) in p.changed {
            if let Some(s) = self.sessions.get(&id) {
                desired.push(s.tx.send_replace(d));
            }
        }
        self.generation += 1;
        Replaced {
            _feeds: old,
            _desired: desired,
        }
    }

    /// The settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    /// The cluster epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Hosts moved between workers since start.
    pub fn moves_total(&self) -> u64 {
        self.moves_total
    }

    /// Opens a session. A live session of the same name is replaced (a restarted worker
    /// takes over its own hosts at once instead of waiting for the old lease to expire).
    /// A worker already known by name (live, or awaited since a failover) at the same
    /// capacity takes exactly the hosts it had or that were held for it, and no other host
    /// moves: dealing again would place hosts by the loads of the plan now in force, which
    /// drift from those they were placed by, and move hosts no membership change called for.
    pub fn register(
        &mut self,
        name: &str,
        capacity: f64,
        now: Instant,
    ) -> Result<String, ClusterError> {
        if name.is_empty() || name.len() > 200 {
            return Err(ClusterError::InvalidArgument(
                "worker_name must be 1 to 200 bytes".into(),
            ));
        }
        if !(capacity > 0.0 && capacity.is_finite()) {
            return Err(ClusterError::InvalidArgument(format!(
                "capacity_fetches_per_second must be a positive number, got {capacity}"
            )));
        }
        let known = self
            .sessions
            .values()
            .find(|s| s.name == name)
            .map(|s| s.capacity)
            .or_else(|| self.awaited.get(name).copied());
        self.sessions.retain(|_, s| s.name != name);
        self.awaited.remove(name);
        let id = format!("{name}#{}", self.next_id);
        self.next_id += 1;
        let (tx, _) = watch::channel(Desired::default());
        self.sessions.insert(
            id.clone(),
            Session {
                name: name.to_string(),
                capacity,
                lease_until: now + self.cfg.lease,
                tx,
                observed: Observed::default(),
                clock_off: false,
            },
        );
        if known == Some(capacity) {
            self.rebind(name, &id);
        } else {
            self.reshard();
        }
        Ok(id)
    }

    /// Renews a lease; returns the session's desired-state version.
    pub fn heartbeat(
        &mut self,
        id: &str,
        observed: Observed,
        now: Instant,
    ) -> Result<u64, ClusterError> {
        let lease = self.cfg.lease;
        let s = self
            .sessions
            .get_mut(id)
            .filter(|s| s.lease_until >= now)
            .ok_or_else(|| ClusterError::UnknownWorker(id.to_string()))?;
        s.lease_until = now + lease;
        s.observed = observed;
        if let Some(off) = observed.clock_offset_ms {
            let is_off = off.unsigned_abs() > CLOCK_OFFSET_WARN_MS as u64;
            if is_off != s.clock_off {
                s.clock_off = is_off;
                if is_off {
                    tracing::warn!(
                        worker = %s.name,
                        offset_s = off as f64 / 1000.0,
                        "a worker's clock differs from this coordinator's: it fetches off the plan by as much (check NTP on both)"
                    );
                } else {
                    tracing::info!(worker = %s.name, offset_s = off as f64 / 1000.0, "a worker's clock agrees with this coordinator's again");
                }
            }
        }
        Ok(s.tx.borrow().version)
    }

    /// Drops sessions whose lease ran out; returns their names.
    pub fn expire(&mut self, now: Instant) -> Vec<String> {
        let gone: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.lease_until < now)
            .map(|(id, _)| id.clone())
            .collect();
        let names = gone
            .iter()
            .filter_map(|id| self.sessions.remove(id).map(|s| s.name))
            .collect::<Vec<_>>();
        if !names.is_empty() {
            self.reshard();
        }
        names
    }

    /// Ends session `id` at the worker's word (it drained and is stopping) and deals its
    /// hosts again; returns its name, or `None` for a session that is not live.
    pub fn leave(&mut self, id: &str) -> Option<String> {
        let s = self.sessions.remove(id)?;
        self.reshard();
        Some(s.name)
    }

    /// The desired-state channel of a live session.
    pub fn subscribe(&self, id: &str) -> Result<watch::Receiver<Desired>, ClusterError> {
        self.sessions
            .get(id)
            .map(|s| s.tx.subscribe())
            .ok_or_else(|| ClusterError::UnknownWorker(id.to_string()))
    }

    /// Whether session `id` is live.
    pub fn has_session(&self, id: &str) -> bool {
        self.sessions.contains_key(id)
    }

    /// The session that owns `feed`'s host now, if any.
    pub fn owner_of_feed(&self, feed: &str) -> Option<&str> {
        let spec = self.feeds.get(feed)?;
        self.owner.get(&spec.host).map(String::as_str)
    }

    /// Whether session `worker` may report for `feed` (it owns the feed's host now).
    pub fn check_owner(&self, worker: &str, feed: &str) -> Result<(), String> {
        if !self.sessions.contains_key(worker) {
            return Err(format!("worker session `{worker}` is unknown or expired"));
        }
        let spec = self
            .feeds
            .get(feed)
            .ok_or_else(|| format!("feed `{feed}` is not in the plan"))?;
        match self.owner.get(&spec.host) {
            Some(w) if w == worker => Ok(()),
            _ => Err(format!(
                "feed `{feed}` (host {}) is not assigned to worker `{worker}`",
                spec.host
            )),
        }
    }

    /// Installs new fetch times for all feeds. Owners stay unless the set of hosts changed.
    pub fn set_feeds(&mut self, feeds: BTreeMap<String, FeedSpec>) {
        let hosts_changed = {
            let old: std::collections::BTreeSet<&str> =
                self.feeds.values().map(|f| f.host.as_str()).collect();
            let new: std::collections::BTreeSet<&str> =
                feeds.values().map(|f| f.host.as_str()).collect();
            old != new
        };
        self.feeds = feeds;
        self.hosts = Arc::new(self.feeds.values().map(|f| f.host.clone()).collect());
        if hosts_changed {
            self.reshard();
        } else {
            self.publish();
        }
    }

    /// New fetch times for a few feeds between plans (offsets and period; the rest of each
    /// spec stays): only their owners get a new desired state. Feeds not planned are
    /// skipped.
    pub fn update_times(&mut self, times: &[(String, Vec<f64>, f64)]) {
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for (id, offsets, period) in times {
            let Some(spec) = self.feeds.get_mut(id) else {
                continue;
            };
            spec.offsets_seconds.clone_from(offsets);
            spec.period_seconds = *period;
            spec.origin_unix_ms = 0;
            if let Some(w) = self.owner.get(&spec.host) {
                touched.insert(w.clone());
            }
        }
        for w in &touched {
            let Some(s) = self.sessions.get(w) else {
                continue;
            };
            let current = s.tx.borrow().clone();
            if current.version == 0 {
                continue; // Its first state comes whole, with the next plan.
            }
            let mut feeds = BTreeMap::clone(&current.feeds);
            for (id, _, _) in times {
                if let (Some(slot), Some(spec)) = (feeds.get_mut(id), self.feeds.get(id)) {
                    *slot = spec.clone();
                }
            }
            s.tx.send_replace(Desired {
                version: current.version + 1,
                feeds: Arc::new(feeds),
                allowance: current.allowance,
            });
        }
        if !touched.is_empty() {
            self.generation += 1;
        }
    }

    /// The planned feeds.
    pub fn feeds(&self) -> &BTreeMap<String, FeedSpec> {
        &self.feeds
    }

    /// Live sessions.
    pub fn workers(&self) -> Vec<WorkerInfo> {
        let now = Instant::now();
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.sessions
            .iter()
            .map(|(id, s)| {
                let d = s.tx.borrow();
                WorkerInfo {
                    id: id.clone(),
                    name: s.name.clone(),
                    capacity: s.capacity,
                    hosts: self.owner.values().filter(|w| *w == id).count(),
                    feeds: d.feeds.len(),
                    version: d.version,
                    report_backlog: s.observed.report_backlog,
                    in_flight: s.observed.in_flight,
                    applied_version: s.observed.applied_version,
                    clock_offset_ms: s.observed.clock_offset_ms,
                    last_heartbeat_unix_ms: now_unix
                        - now
                            .saturating_duration_since(s.lease_until - self.cfg.lease)
                            .as_millis() as i64,
                }
            })
            .collect()
    }

    /// Sends every session whose feed set or fetch times changed its new desired state.
    fn publish(&mut self) {
        self.generation += 1;
        let mut per_worker: HashMap<&str, BTreeMap<String, FeedSpec>> = HashMap::new();
        for f in self.feeds.values() {
            if let Some(w) = self.owner.get(&f.host) {
                per_worker
                    .entry(w.as_str())
                    .or_default()
                    .insert(f.id.clone(), f.clone());
            }
        }
        for (id, s) in &self.sessions {
            let feeds = per_worker.remove(id.as_str()).unwrap_or_default();
            let current = s.tx.borrow().clone();
            if current.version == 0 || *current.feeds != feeds {
                s.tx.send_replace(Desired {
                    version: current.version + 1,
                    feeds: Arc::new(feeds),
                    allowance: current.allowance,
                });
            }
        }
    }

    /// Deals the day's budget over the sessions as they stand (after a change of members
    /// or hosts); sessions whose allowance changes get a new version.
    pub fn deal(&mut self, deal: Dealer) {
        let current: Vec<(String, Desired)> = self
            .sessions
            .iter()
            .map(|(id, s)| (id.clone(), s.tx.borrow().clone()))
            .collect();
        let refs: Vec<(&str, &BTreeMap<String, FeedSpec>)> = current
            .iter()
            .map(|(id, d)| (id.as_str(), d.feeds.as_ref()))
            .collect();
        let mut allowances = deal(&refs);
        let mut changed = false;
        for (id, d) in current {
            let allowance = allowances.remove(&id);
            if d.version > 0 && d.allowance != allowance {
                if let Some(s) = self.sessions.get(&id) {
                    s.tx.send_replace(Desired {
                        version: d.version + 1,
                        feeds: d.feeds,
                        allowance,
                    });
                    changed = true;
                }
            }
        }
        if changed {
            self.generation += 1;
        }
    }
}

#[path = "cluster_deal.rs"]
mod deal;
pub use deal::{Member, MAX_SPILLED_STORED};

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
