//! Everything the control plane can be asked, in one place: each request is a type with
//! its reply type and its handler, run on the actor's task with the [`State`] to itself
//! ([`super::actor`]). The hub's methods gather what a request needs from the store, send
//! it with [`super::actor::Actor::ask`] (or [`super::actor::Actor::tell`] when nobody
//! waits), and make its result durable afterwards; a handler never awaits, reads the store
//! or solves.
//!
//! The requests, by what they are about:
//! - **reads**: [`GetTotals`], [`PlansMade`], [`GetSettings`], [`SettingsAndFeedsPlanned`],
//!   [`Inspect`], [`FeedHealth`], [`Subscriptions`], [`FeedsPlanned`], [`Workers`],
//!   [`FeedSpecs`], [`Allowance`], [`PostingVolume`], [`LearnedState`], [`LearnedStates`],
//!   [`HostLimits`], [`Members`], [`NextHourDemand`], [`Assignments`];
//! - **settings and limits**: [`InstallSettings`], [`SetHostLimit`];
//! - **worker sessions**: [`RegisterWorker`], [`Heartbeat`], [`Subscribe`],
//!   [`ExpireLeases`], [`StopAwaiting`];
//! - **the registry's changes**, after the store has them: [`FeedAdded`], [`FeedRemoved`],
//!   [`UserAdded`], [`UserRemoved`], [`FeedsImported`];
//! - **reader access**: [`RecordAccess`], [`RecordAccessAllOrNone`], [`TakeDirtyAccess`],
//!   [`MarkAccessDirty`];
//! - **reports** (check, then install once durable): [`CheckReports`], [`InstallReports`],
//!   [`InstallLearned`];
//! - **between rounds**: [`Surprises`], [`ApplyQuick`];
//! - **WebSub push**: [`EnablePush`], [`PushTick`], [`OpenTasks`], [`PushIntent`],
//!   [`PushTarget`] (hubs' answers to requests come in [`CheckReports`]);
//! - **rounds** (take the replanner and inputs, hand back the solve): [`TakeReplanner`],
//!   [`RoundInputs`], [`FeedAccess`], [`RoundSolved`].
//!
//! The periodic work (rounds, lease expiry, store upkeep) runs in the hub's loops
//! ([`super::rounds`]), which send these same requests; the loops stop on the term's stop
//! signal and are joined before the term ends.

use super::actor::{Message, Parked, State};
use super::figures::{FeedView, HealthView, Totals};
use super::quick::{Found, Job};
use super::reports::{Accepted, Learned};
use super::rounds::Solved;
use crate::access::{AccessCounts, AccessEvent, StoredAccess};
use crate::control::cluster::{
    ClusterError, Desired, Member, Observed, SessionFigures, WorkerInfo,
};
use crate::control::feedstate::FeedState;
use crate::control::health::HealthPolicy;
use crate::control::quick::{Basis, Update};
use crate::control::readers;
use crate::control::relearn::{PlanOutcome, PlannerSettings};
use crate::control::FeedSpec;
use crate::metrics as m;
use crate::registry::FeedRecord;
use kairos_proto::v1 as pb;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

// ---- reads ----

/// The running totals.
pub(super) struct GetTotals;
impl Message for GetTotals {
    type Reply = Totals;
    fn handle(self, s: &mut State) -> Totals {
        s.totals.clone()
    }
}

/// Plans this term has installed (0 while it serves a stored one).
pub(super) struct PlansMade;
impl Message for PlansMade {
    type Reply = u64;
    fn handle(self, s: &mut State) -> u64 {
        s.totals.plans
    }
}

/// The planner settings in force.
pub(super) struct GetSettings;
impl Message for GetSettings {
    type Reply = PlannerSettings;
    fn handle(self, s: &mut State) -> PlannerSettings {
        s.settings.1.clone()
    }
}

/// The planner settings in force and the feeds in the current plan, read together.
pub(super) struct SettingsAndFeedsPlanned;
impl Message for SettingsAndFeedsPlanned {
    type Reply = (PlannerSettings, usize);
    fn handle(self, s: &mut State) -> Self::Reply {
        (s.settings.1.clone(), s.cluster.feeds().len())
    }
}

/// A feed's learned model and plan from the last round (or its update since), as
/// InspectFeedPlan shows it.
pub(super) struct Inspect {
    pub feed: String,
    pub now_ms: i64,
    pub policy: HealthPolicy,
}
impl Message for Inspect {
    type Reply = Option<FeedView>;
    fn handle(self, s: &mut State) -> Option<FeedView> {
        s.inspect(&self.feed, self.now_ms, &self.policy)
    }
}

/// Each of `feeds`' plan-in-force expected delay per posting, seconds (NaN: not planned).
pub(super) struct ExpectedDelays(pub Arc<Vec<String>>);
impl Message for ExpectedDelays {
    type Reply = Vec<f64>;
    fn handle(self, s: &mut State) -> Vec<f64> {
        self.0
            .iter()
            .map(|f| s.expected_delay_seconds(f).unwrap_or(f64::NAN))
            .collect()
    }
}

/// The fetch health of each feed, in order.
pub(super) struct FeedHealth {
    pub feeds: Vec<String>,
    pub now_ms: i64,
    pub policy: HealthPolicy,
}
impl Message for FeedHealth {
    type Reply = Vec<HealthView>;
    fn handle(self, s: &mut State) -> Vec<HealthView> {
        let Self {
            feeds,
            now_ms,
            policy,
        } = self;
        feeds
            .iter()
            .map(|f| s.feed_health(f, now_ms, &policy))
            .collect()
    }
}

/// Subscriptions known at the last round.
pub(super) struct Subscriptions;
impl Message for Subscriptions {
    type Reply = usize;
    fn handle(self, s: &mut State) -> usize {
        s.subscribers.values().map(Vec::len).sum()
    }
}

/// The plans' record of delivered against promised delay, to store with the plan.
pub(super) struct Promises;
impl Message for Promises {
    type Reply = crate::control::promise::PromiseRecord;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.promises
    }
}

/// Feeds in the current plan.
pub(super) struct FeedsPlanned;
impl Message for FeedsPlanned {
    type Reply = usize;
    fn handle(self, s: &mut State) -> usize {
        s.cluster.feeds().len()
    }
}

/// Live worker sessions.
pub(super) struct Workers;
impl Message for Workers {
    type Reply = Vec<WorkerInfo>;
    fn handle(self, s: &mut State) -> Vec<WorkerInfo> {
        s.cluster.workers()
    }
}

/// The planned fetch times of each feed, in order (`None`: not planned).
pub(super) struct FeedSpecs(pub Vec<String>);
impl Message for FeedSpecs {
    type Reply = Vec<Option<FeedSpec>>;
    fn handle(self, s: &mut State) -> Self::Reply {
        self.0
            .iter()
            .map(|f| s.cluster.feeds().get(f).cloned())
            .collect()
    }
}

/// The daily allowance dealt to a worker session, as its assignment carries it.
pub(super) struct Allowance {
    pub session: String,
}
impl Message for Allowance {
    type Reply = Option<kairos_runtime::allowance::Allowance>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.cluster
            .subscribe(&self.session)
            .ok()
            .and_then(|rx| rx.borrow().allowance)
    }
}

/// Feeds known (planned, learned, or registered when the term began: whichever is most)
/// and the postings a day they were seen to publish over each feed's watched span in the
/// learning window (at least a day): what the store's retention window must hold.
pub(super) struct PostingVolume {
    pub now_ms: i64,
    pub window_ms: i64,
    pub registered_at_open: usize,
}
impl Message for PostingVolume {
    type Reply = (usize, f64);
    fn handle(self, s: &mut State) -> (usize, f64) {
        let Self {
            now_ms: now,
            window_ms,
            registered_at_open,
        } = self;
        let per_day = s
            .feeds
            .values()
            .map(|st| st.postings_per_day_seen(now, window_ms))
            .sum();
        let feeds = s.cluster.feeds().len().max(s.feeds.len());
        (feeds.max(registered_at_open), per_day)
    }
}

/// A copy of one feed's learned state.
pub(super) struct LearnedState(pub String);
impl Message for LearnedState {
    type Reply = Option<FeedState>;
    fn handle(self, s: &mut State) -> Option<FeedState> {
        s.feeds.get(&self.0).map(|st| FeedState::clone(st))
    }
}

/// The learned states of these feeds, shared (those that have one), and which of them were
/// removed lately ([`super::removal`]).
pub(super) struct LearnedStates(pub Vec<String>);
impl Message for LearnedStates {
    type Reply = (HashMap<String, Arc<FeedState>>, HashSet<String>);
    fn handle(self, s: &mut State) -> Self::Reply {
        let removed = self
            .0
            .iter()
            .filter(|f| s.removed.contains_key(*f))
            .cloned()
            .collect();
        let states = self
            .0
            .into_iter()
            .filter_map(|f| s.feeds.get(&f).map(|st| (f, st.clone())))
            .collect();
        (states, removed)
    }
}

/// The operators' host limits in force, by host (unordered).
pub(super) struct HostLimits;
impl Message for HostLimits {
    type Reply = Vec<crate::host_limits::HostLimit>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.host_limits
            .iter()
            .map(|(h, &m)| crate::host_limits::HostLimit {
                host: h.clone(),
                max_fetches_per_day: m,
            })
            .collect()
    }
}

/// The term's workers, as the next leader should await them.
pub(super) struct Members;
impl Message for Members {
    type Reply = Vec<Member>;
    fn handle(self, s: &mut State) -> Vec<Member> {
        s.cluster.members()
    }
}

/// The next hour's planned fetches against the workers' declared capacity.
pub(super) struct NextHourDemand {
    pub now_ms: i64,
}
impl Message for NextHourDemand {
    type Reply = crate::control::capacity::Demand;
    fn handle(self, s: &mut State) -> Self::Reply {
        let capacity: f64 = s.cluster.workers().iter().map(|w| w.capacity).sum();
        crate::control::capacity::next_hour(s.cluster.feeds().values(), self.now_ms, capacity)
    }
}

/// Assignments as sent: each spec with its feed's validators and recent item ids.
pub(super) struct Assignments(pub Vec<FeedSpec>);
impl Message for Assignments {
    type Reply = Vec<pb::FeedAssignment>;
    fn handle(self, s: &mut State) -> Self::Reply {
        self.0
            .into_iter()
            .map(|spec| {
                let st = s.feeds.get(&spec.id).map(|a| &**a);
                super::assignment(spec, st)
            })
            .collect()
    }
}

// ---- settings and limits ----

/// New planner settings, already validated and stored; the next round plans with them.
pub(super) struct InstallSettings(pub PlannerSettings);
impl Message for InstallSettings {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.settings = (s.settings.0 + 1, self.0);
    }
}

/// An operator's limit on a host's fetches a day, already stored (`None`: cleared).
pub(super) struct SetHostLimit {
    pub host: String,
    pub max_fetches_per_day: Option<f64>,
}
impl Message for SetHostLimit {
    type Reply = ();
    fn handle(self, s: &mut State) {
        match self.max_fetches_per_day {
            Some(max) => s.host_limits.insert(self.host, max),
            None => s.host_limits.remove(&self.host),
        };
    }
}

// ---- worker sessions ----

/// Opens a worker session and deals the day's allowances again; replies (id, epoch).
pub(super) struct RegisterWorker {
    pub name: String,
    pub capacity: f64,
    pub now_ms: i64,
}
impl Message for RegisterWorker {
    type Reply = Result<(String, u64), ClusterError>;
    fn handle(self, s: &mut State) -> Self::Reply {
        let before = s.cluster.moves_total();
        let id = s
            .cluster
            .register(&self.name, self.capacity, Instant::now())?;
        s.deal_allowances(self.now_ms);
        let c = &s.cluster;
        m::record_membership(
            c.workers().len(),
            c.moves_total() - before,
            c.spilled_hosts(),
        );
        tracing::info!(worker = %id, capacity = self.capacity, "worker registered");
        Ok((id, c.epoch()))
    }
}

/// Renews a session's lease with what the worker reported of its state; replies (epoch,
/// version of its desired state) and moves the workers' gauges.
pub(super) struct Heartbeat {
    pub session: String,
    pub observed: Observed,
}
impl Message for Heartbeat {
    type Reply = Result<(u64, u64), ClusterError>;
    fn handle(self, s: &mut State) -> Self::Reply {
        let c = &mut s.cluster;
        let v = c.heartbeat(&self.session, self.observed, Instant::now())?;
        let f = SessionFigures::of(&c.workers());
        m::record_worker_sessions(
            f.report_backlog,
            f.in_flight,
            f.behind,
            f.max_clock_offset_ms,
        );
        Ok((c.epoch(), v))
    }
}

/// A session's desired-state channel, with the term's epoch.
pub(super) struct Subscribe {
    pub session: String,
}
impl Message for Subscribe {
    type Reply = Result<(u64, tokio::sync::watch::Receiver<Desired>), ClusterError>;
    fn handle(self, s: &mut State) -> Self::Reply {
        Ok((s.cluster.epoch(), s.cluster.subscribe(&self.session)?))
    }
}

/// Drops the sessions whose lease ran out; their hosts move to the others.
pub(super) struct ExpireLeases {
    pub now_ms: i64,
}
impl Message for ExpireLeases {
    type Reply = ();
    fn handle(self, s: &mut State) {
        let before = s.cluster.moves_total();
        let gone = s.cluster.expire(Instant::now());
        if !gone.is_empty() {
            s.deal_allowances(self.now_ms);
            let c = &s.cluster;
            tracing::warn!(workers = ?gone, "worker leases expired; hosts reassigned");
            m::record_membership(
                c.workers().len(),
                c.moves_total() - before,
                c.spilled_hosts(),
            );
        }
    }
}

/// A worker that drained says it is leaving: its session ends and its hosts are dealt
/// again at once. Replies whether the session was live.
pub(super) struct Leave {
    pub session: String,
    pub now_ms: i64,
}
impl Message for Leave {
    type Reply = bool;
    fn handle(self, s: &mut State) -> bool {
        let before = s.cluster.moves_total();
        let Some(name) = s.cluster.leave(&self.session) else {
            return false;
        };
        s.deal_allowances(self.now_ms);
        let c = &s.cluster;
        tracing::info!(worker = %name, "worker left after draining; hosts reassigned");
        m::record_membership(
            c.workers().len(),
            c.moves_total() - before,
            c.spilled_hosts(),
        );
        true
    }
}

/// Gives up on the last term's workers that have not come back in time; replies their
/// names.
pub(super) struct StopAwaiting {
    pub now_ms: i64,
}
impl Message for StopAwaiting {
    type Reply = Vec<String>;
    fn handle(self, s: &mut State) -> Vec<String> {
        let gone = s.cluster.stop_awaiting(Instant::now());
        if !gone.is_empty() {
            s.deal_allowances(self.now_ms);
        }
        gone
    }
}

// ---- the registry's changes (the store has them already) ----

/// A feed was registered.
pub(super) struct FeedAdded(pub String);
impl Message for FeedAdded {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.access.set_feed(&self.0);
        // Registered again: its reports count from now on.
        s.removed.remove(&self.0);
    }
}

/// A feed was removed: out of the reader statistics, and its learned state forgotten (the
/// registry deleted the stored copy).
pub(super) struct FeedRemoved {
    pub id: String,
    pub now_ms: i64,
}
impl Message for FeedRemoved {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.access.remove_feed(&self.id);
        s.feeds.remove(&self.id);
        s.subscribers.remove(&self.id);
        let since = self.now_ms - super::removal::REMOVED_KEPT_MS;
        s.removed.retain(|_, at| *at >= since);
        s.removed.insert(self.id, self.now_ms);
    }
}

/// A user was registered (or its weight changed).
pub(super) struct UserAdded {
    pub id: String,
    pub weight: f32,
}
impl Message for UserAdded {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.access.set_user(&self.id, self.weight);
    }
}

/// A user was removed.
pub(super) struct UserRemoved(pub String);
impl Message for UserRemoved {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.access.remove_user(&self.0);
    }
}

/// An OPML import registered these feeds.
pub(super) struct FeedsImported(pub Vec<String>);
impl Message for FeedsImported {
    type Reply = ();
    fn handle(self, s: &mut State) {
        self.0.iter().for_each(|f| s.access.set_feed(f));
    }
}

// ---- reader access ----

/// Records the events that can be, counting the ones that cannot.
pub(super) struct RecordAccess {
    pub events: Vec<AccessEvent>,
    pub now_ms: i64,
}
impl Message for RecordAccess {
    type Reply = AccessCounts;
    fn handle(self, s: &mut State) -> AccessCounts {
        s.record_access(&self.events, self.now_ms)
    }
}

/// Records every event or, when any cannot be recorded, none (the counts say why);
/// checked and recorded in one message, so a user removed meanwhile cannot slip in.
pub(super) struct RecordAccessAllOrNone {
    pub events: Vec<AccessEvent>,
    pub now_ms: i64,
}
impl Message for RecordAccessAllOrNone {
    type Reply = Result<AccessCounts, AccessCounts>;
    fn handle(self, s: &mut State) -> Self::Reply {
        let c = s.access.check(&self.events, self.now_ms);
        if c.accepted as usize != self.events.len() {
            return Err(c);
        }
        Ok(s.record_access(&self.events, self.now_ms))
    }
}

/// The histograms of users with accesses since the last call, to store; they count as
/// clean from now on.
pub(super) struct TakeDirtyAccess;
impl Message for TakeDirtyAccess {
    type Reply = Vec<(String, StoredAccess)>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.access.take_dirty()
    }
}

/// These users' histograms were not stored after all: the next call takes them again.
pub(super) struct MarkAccessDirty(pub Vec<String>);
impl Message for MarkAccessDirty {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.access.mark_dirty(self.0);
    }
}

// ---- reports ----

/// Checks a batch of a session's report messages; replies the ack for the refused ones
/// and the accepted ones, to be made durable.
pub(super) struct CheckReports {
    pub session: String,
    pub msgs: Vec<pb::ReportMessage>,
    pub now_ms: i64,
}
impl Message for CheckReports {
    type Reply = (pb::ReportAck, Vec<Accepted>);
    fn handle(self, s: &mut State) -> Self::Reply {
        s.check_reports(&self.session, self.msgs, self.now_ms)
    }
}

/// Durable reports: their feeds' learned state goes in and the measures move; replies the
/// permanent redirects to follow in the registry.
pub(super) struct InstallReports {
    pub worker_name: String,
    pub accepted: Vec<Accepted>,
    pub learned: Vec<Learned>,
    pub counts: crate::ingest::IngestCounts,
    pub same_slot: usize,
}
impl Message for InstallReports {
    type Reply = Vec<(String, String)>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.install_reports(
            &self.worker_name,
            self.accepted,
            self.learned,
            self.counts,
            self.same_slot,
        )
    }
}

/// A feed's learned state, already stored (an operator's ResumeFeed).
pub(super) struct InstallLearned {
    pub feed: String,
    pub state: FeedState,
}
impl Message for InstallLearned {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.feeds.insert(self.feed, Arc::new(self.state));
    }
}

// ---- between rounds ----

/// The fetches that surprised their feed's model, ready to re-solve off the actor.
pub(super) struct Surprises(pub Vec<Found>);
impl Message for Surprises {
    type Reply = Option<(Arc<Basis>, Vec<Job>)>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.surprises(self.0)
    }
}

/// Feeds re-solved alone: their new times go to their workers now.
pub(super) struct ApplyQuick {
    pub updates: Vec<(String, Update)>,
    pub now_ms: i64,
}
impl Message for ApplyQuick {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.apply_quick(self.updates, self.now_ms);
    }
}

// ---- rounds ----

/// The replanner, moved out for a round's solve (`None` while another round has it).
pub(super) struct TakeReplanner;
impl Message for TakeReplanner {
    type Reply = Option<Parked>;
    fn handle(self, s: &mut State) -> Option<Parked> {
        s.replanner.take()
    }
}

/// What a round's solve reads besides the registry, taken at once: the learned states
/// (shared by pointer), the settings, the throttles and limits, the cluster's owners, the
/// day's ledger and the first sights. The subscribers the round read replace the last
/// round's, which come back to be freed off the actor.
pub(super) struct RoundInputs {
    pub now_ms: i64,
    pub subscribers: HashMap<String, Vec<String>>,
}

/// The reply to [`RoundInputs`].
pub(super) struct Inputs {
    pub states: HashMap<String, Arc<FeedState>>,
    pub settings: (u64, PlannerSettings),
    pub throttles: crate::control::hosts::HostThrottles,
    pub limits: HashMap<String, f64>,
    pub shard: crate::control::cluster::ShardView,
    pub old_subscribers: HashMap<String, Vec<String>>,
    pub ledger: super::figures::Ledger,
    pub counted: BTreeMap<String, u64>,
    pub first_sights: HashMap<String, i64>,
    pub paced_day: super::pacing::Steering,
    /// The share of each pushed feed's postings its polls must find ([`super::push`]).
    pub push_shares: HashMap<String, f64>,
}

impl Message for RoundInputs {
    type Reply = Inputs;
    fn handle(self, s: &mut State) -> Inputs {
        let now = self.now_ms;
        let (throttles, limits) = s.throttles_for_round(now);
        Inputs {
            states: s.feeds.clone(),
            settings: s.settings.clone(),
            throttles,
            limits,
            shard: s.cluster.shard_view(),
            old_subscribers: std::mem::replace(&mut s.subscribers, self.subscribers),
            ledger: s.totals.ledger,
            counted: s.totals.worker_counts_today(now),
            first_sights: s.first_sights.clone(),
            paced_day: s.paced_day,
            push_shares: s.push_miss_shares(now),
        }
    }
}

/// The weighted access histograms of a slice of the round's feeds' subscribers (sent in
/// chunks so a 100k-feed round does not hold the actor in one message).
pub(super) struct FeedAccess {
    pub feeds: Arc<Vec<FeedRecord>>,
    pub range: std::ops::Range<usize>,
    pub users: Arc<HashMap<String, f64>>,
}
impl Message for FeedAccess {
    type Reply = Vec<(String, readers::FeedAccess)>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.feed_access(&self.feeds[self.range], &self.users)
    }
}

/// A round's solve came back: the replanner returns to the state and a plan solved is
/// installed; the result goes to the round, if it still waits.
pub(super) struct RoundSolved {
    pub parked: Parked,
    pub solved: Result<Solved, String>,
    pub reply: tokio::sync::oneshot::Sender<anyhow::Result<PlanOutcome>>,
}
impl Message for RoundSolved {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.replanner = Some(self.parked);
        let result = match self.solved {
            Ok(solved) => Ok(s.install_plan(solved)),
            Err(e) => Err(anyhow::anyhow!("planning failed: {e}")),
        };
        let _ = self.reply.send(result);
    }
}

// ---- WebSub push ([`super::push`]) ----

/// Turns push on with the stored subscriptions and hub records.
pub(super) struct EnablePush {
    pub config: super::push::PushConfig,
    pub subs: Vec<crate::control::push::Subscription>,
    pub hubs: HashMap<String, crate::control::push::HubRecord>,
}
impl Message for EnablePush {
    type Reply = ();
    fn handle(self, s: &mut State) {
        s.push.subs = crate::control::push::Subscriptions::from_stored(self.subs);
        s.push.hubs = self.hubs;
        s.push.config = Some(self.config);
    }
}

/// Drives the subscriptions; returns what to store.
pub(super) struct PushTick {
    pub now_ms: i64,
}
impl Message for PushTick {
    type Reply = super::push::PushWrites;
    fn handle(self, s: &mut State) -> super::push::PushWrites {
        s.push_tick(self.now_ms)
    }
}

/// Opens a worker session's task stream.
pub(super) struct OpenTasks {
    pub session: String,
}
impl Message for OpenTasks {
    type Reply = Option<tokio::sync::mpsc::Receiver<pb::WorkerTask>>;
    fn handle(self, s: &mut State) -> Self::Reply {
        s.open_tasks(&self.session)
    }
}

/// A hub's verification of intent or denial.
pub(super) struct PushIntent {
    pub callback: String,
    pub intent: crate::push::listener::Intent,
    pub now_ms: i64,
}
impl Message for PushIntent {
    type Reply = bool;
    fn handle(self, s: &mut State) -> bool {
        s.push_intent(&self.callback, self.intent, self.now_ms)
    }
}

/// Where a delivery to a callback goes.
pub(super) struct PushTarget {
    pub callback: String,
    pub now_ms: i64,
}
impl Message for PushTarget {
    type Reply = super::push::Target;
    fn handle(self, s: &mut State) -> super::push::Target {
        s.push_target(&self.callback, self.now_ms)
    }
}
