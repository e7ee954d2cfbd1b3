//! WebSub push on the leader (docs/WEBSUB.md): the subscriptions and each hub's measured
//! reliability, held by the actor; requests to hubs and pushed documents handed to the
//! worker that owns the feed, over its task stream; the callback listener's answers; and
//! what push does to the plan (a pushed feed's polls become a check, scaled by how much its
//! hub misses).
//!
//! The state machine of one subscription is [`crate::control::push`] (pure). Here it is
//! driven: every tick ([`Hub::push_tick`]) brings the subscriptions in line with the hubs
//! the feeds' documents name and sends what is due; the hubs' verifications, denials and
//! content come through [`LeaderPush`], the listener's endpoint; what the hubs answered
//! comes back in the workers' report streams.

use super::actor::State;
use super::messages as msg;
use super::Hub;
use crate::control::push::{
    Action, HubRecord, PushPolicy, Subscription, Subscriptions, Verdict, Wanted,
};
use crate::metrics as m;
use crate::push::listener::{Delivery, Intent, PushEndpoint, Taken};
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};
use kairos_proto::v1 as pb;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Tasks queued for one worker at most; past it a task is dropped and counted (a request
/// is retried by the subscription's back-off, a pushed posting is found by a poll).
const TASK_QUEUE: usize = 1024;

/// How push is set up on this leader.
#[derive(Clone, Debug)]
pub struct PushConfig {
    /// The public URL of the callback listener's `/websub` path, as hubs reach it (e.g.
    /// `https://push.example.org/websub`); each subscription's callback is this plus `/`
    /// and its id.
    pub callback_base: String,
    /// Subscription timing and the reliability's half-life.
    pub policy: PushPolicy,
}

/// What the actor holds of push.
#[derive(Default)]
pub(super) struct PushState {
    /// Set once push is on ([`Hub::enable_push`]).
    pub config: Option<PushConfig>,
    pub subs: Subscriptions,
    /// Each hub's reliability, by hub URL.
    pub hubs: HashMap<String, HubRecord>,
    /// Each worker session's task stream.
    pub outboxes: HashMap<String, mpsc::Sender<pb::WorkerTask>>,
    /// Feeds whose subscription changed since it was last stored.
    pub changed: HashSet<String>,
    /// The hubs' records changed since they were last stored.
    pub hubs_changed: bool,
}

/// Where a delivery goes, as the actor sees it.
pub(super) enum Target {
    /// Not one of our callbacks.
    Unknown,
    /// Ours, but not delivering now (expired, denied, never verified).
    Lapsed,
    /// Ours and delivering: check the signature with `secret`, then hand the body to
    /// `outbox` (none: no worker owns the feed now).
    Deliver {
        feed: String,
        topic: String,
        secret: String,
        outbox: Option<mpsc::Sender<pb::WorkerTask>>,
    },
}

/// What a tick leaves to make durable: subscriptions to put (or delete, `None`) and the
/// hubs' records.
#[derive(Default)]
pub(super) struct PushWrites {
    pub subs: Vec<(String, Option<Subscription>)>,
    pub hubs: Option<HashMap<String, HubRecord>>,
}

/// A fresh callback id and secret: 32 random letters and digits each (190 bits).
fn fresh() -> (String, String) {
    use rand::Rng;
    let draw = || -> String {
        rand::rngs::OsRng
            .sample_iter(&rand::distributions::Alphanumeric)
            .take(32)
            .map(char::from)
            .collect()
    };
    (draw(), draw())
}

impl State {
    /// Brings the subscriptions in line with the hubs the planned feeds name and sends
    /// what is due; returns what changed, to be stored.
    pub(super) fn push_tick(&mut self, now_ms: i64) -> PushWrites {
        let Some(cfg) = self.push.config.clone() else {
            return PushWrites::default();
        };
        // Before a plan is installed the planned feeds are not known: a new leader must not
        // read that as every feed gone and unsubscribe them all.
        if self.budget_per_day.is_some() {
            let mut wanted = HashMap::new();
            for (id, spec) in self.cluster.feeds() {
                let Some(st) = self.feeds.get(id) else {
                    continue;
                };
                if !st.meta.hubs.is_empty() {
                    // No `self` link: the URL fetched is the topic (WebSub §4).
                    let topic = if st.meta.topic.is_empty() {
                        spec.url.clone()
                    } else {
                        st.meta.topic.clone()
                    };
                    wanted.insert(id.clone(), Wanted::new(st.meta.hubs.clone(), topic));
                }
            }
            let before: HashSet<String> = self.push.subs.all().map(|s| s.feed.clone()).collect();
            let actions = self
                .push
                .subs
                .reconcile(&wanted, now_ms, &cfg.policy, &mut fresh);
            for feed in before {
                if self.push.subs.of_feed(&feed).is_none() {
                    self.push.changed.insert(feed);
                }
            }
            for a in actions {
                self.dispatch(a, &cfg, now_ms);
            }
        }
        let mut by_state: HashMap<&'static str, usize> = HashMap::new();
        for s in self.push.subs.all() {
            *by_state.entry(s.state(now_ms)).or_default() += 1;
        }
        m::gauge_push_subscriptions(&by_state);
        for (hub, r) in &self.push.hubs {
            m::gauge_push_hub(
                hub,
                r.miss_share(now_ms, cfg.policy.reliability_half_life_ms),
            );
        }
        let subs = self
            .push
            .changed
            .drain()
            .map(|f| {
                let s = self.push.subs.of_feed(&f).cloned();
                (f, s)
            })
            .collect();
        let hubs = std::mem::take(&mut self.push.hubs_changed).then(|| self.push.hubs.clone());
        PushWrites { subs, hubs }
    }

    /// Hands a request to the worker that owns the feed; a request nobody can send now
    /// counts as failed (retried after the back-off).
    fn dispatch(&mut self, a: Action, cfg: &PushConfig, now_ms: i64) {
        let base = cfg.callback_base.trim_end_matches('/');
        let (feed, request) = match a {
            Action::Subscribe {
                feed,
                hub,
                topic,
                callback,
                secret,
                lease_seconds,
                moved_from,
            } => {
                if let Some(from) = moved_from {
                    // Logged here, where the move is carried out; the pure state only
                    // decides it.
                    tracing::info!(feed = %feed, from = %from, to = %hub, "websub: moving on to the next hub the feed names");
                    m::record_push_fallback();
                }
                (
                    feed.clone(),
                    pb::HubRequest {
                        feed_id: feed,
                        hub,
                        mode: "subscribe".into(),
                        topic,
                        callback_url: format!("{base}/{callback}"),
                        secret,
                        lease_seconds,
                    },
                )
            }
            Action::Unsubscribe {
                feed,
                hub,
                topic,
                callback,
            } => (
                feed.clone(),
                pb::HubRequest {
                    feed_id: feed,
                    hub,
                    mode: "unsubscribe".into(),
                    topic,
                    callback_url: format!("{base}/{callback}"),
                    secret: String::new(),
                    lease_seconds: 0,
                },
            ),
        };
        self.push.changed.insert(feed.clone());
        let subscribe = request.mode == "subscribe";
        let task = pb::WorkerTask {
            epoch: self.cluster.epoch(),
            task: Some(pb::worker_task::Task::HubRequest(request)),
        };
        match self.send_task(&feed, task) {
            Ok(()) => m::record_push_task("hub_request"),
            Err(why) => {
                m::record_push_task(why);
                if subscribe {
                    self.push.subs.request_answered(
                        &feed,
                        Err(format!("not sent: {why}")),
                        now_ms,
                        &cfg.policy,
                    );
                }
            }
        }
    }

    /// Queues `task` for the session that owns `feed`; a request to a hub for a feed no
    /// session owns (one removed from the plan, unsubscribed) goes to any session with a
    /// task stream, since any worker can send it.
    fn send_task(&mut self, feed: &str, task: pb::WorkerTask) -> Result<(), &'static str> {
        let owner = match self.cluster.owner_of_feed(feed) {
            Some(o) => o.to_string(),
            None if matches!(task.task, Some(pb::worker_task::Task::HubRequest(_))) => self
                .push
                .outboxes
                .keys()
                .min()
                .cloned()
                .ok_or("no_task_stream")?,
            None => return Err("no_owner"),
        };
        let outbox = self.push.outboxes.get(&owner).ok_or("no_task_stream")?;
        match outbox.try_send(task) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err("queue_full"),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.push.outboxes.remove(&owner);
                Err("no_task_stream")
            }
        }
    }

    /// A worker session's task stream: the receiving end, for the stream's lifetime.
    pub(super) fn open_tasks(&mut self, session: &str) -> Option<mpsc::Receiver<pb::WorkerTask>> {
        if !self.cluster.has_session(session) {
            return None;
        }
        let (tx, rx) = mpsc::channel(TASK_QUEUE);
        self.push.outboxes.insert(session.to_string(), tx);
        Some(rx)
    }

    /// A hub's verification of intent or denial.
    pub(super) fn push_intent(&mut self, callback: &str, intent: Intent, now_ms: i64) -> bool {
        let Some(cfg) = self.push.config.clone() else {
            return false;
        };
        let feed = self.push.subs.of_callback(callback).map(|s| s.feed.clone());
        let (ok, what) = match intent {
            Intent::Verify {
                mode,
                topic,
                lease_seconds,
            } => {
                let v = self.push.subs.verify(
                    callback,
                    &mode,
                    &topic,
                    lease_seconds,
                    now_ms,
                    &cfg.policy,
                );
                if let Verdict::Refuse(why) = v {
                    tracing::info!(
                        callback,
                        mode,
                        topic,
                        why,
                        "a verification of intent refused"
                    );
                }
                (v == Verdict::Confirm, "verified")
            }
            Intent::Denied { topic, reason } => {
                let ok = self
                    .push
                    .subs
                    .denied(callback, &topic, &reason, now_ms, &cfg.policy);
                if ok {
                    tracing::warn!(callback, topic, reason, "a hub denied a subscription");
                    if let Some(s) = feed.as_deref().and_then(|f| self.push.subs.of_feed(f)) {
                        let hub = s.hub.clone();
                        self.push.hubs.entry(hub).or_default().failures += 1;
                        self.push.hubs_changed = true;
                    }
                }
                (ok, "denied")
            }
        };
        if ok {
            if let Some(f) = feed {
                self.push.changed.insert(f);
            }
        }
        tracing::debug!(callback, ok, what, "hub intent");
        ok
    }

    /// Where a delivery to `callback` goes.
    pub(super) fn push_target(&self, callback: &str, now_ms: i64) -> Target {
        let Some(s) = self.push.subs.of_callback(callback) else {
            return Target::Unknown;
        };
        if !s.delivering(now_ms) {
            return Target::Lapsed;
        }
        let outbox = self
            .cluster
            .owner_of_feed(&s.feed)
            .and_then(|o| self.push.outboxes.get(o))
            .cloned();
        Target::Deliver {
            feed: s.feed.clone(),
            topic: s.topic.clone(),
            secret: s.secret.clone(),
            outbox,
        }
    }

    /// What a hub answered a request a worker sent it.
    pub(super) fn hub_answered(&mut self, a: pb::HubAnswer, now_ms: i64) {
        let Some(cfg) = self.push.config.clone() else {
            return;
        };
        let Some(s) = self.push.subs.of_feed(&a.feed_id) else {
            return; // Removed meanwhile.
        };
        if a.mode != "subscribe" || s.hub != a.hub {
            if !a.accepted {
                tracing::info!(feed = %a.feed_id, hub = %a.hub, mode = %a.mode, error = %a.error, "a hub refused a request");
            }
            return;
        }
        let answer = if a.accepted {
            m::record_push_answer("accepted");
            Ok(Some(a.accepted_by).filter(|h| !h.is_empty() && *h != a.hub))
        } else {
            m::record_push_answer("refused");
            tracing::warn!(feed = %a.feed_id, hub = %a.hub, error = %a.error, "a hub refused a subscription");
            self.push.hubs.entry(a.hub.clone()).or_default().failures += 1;
            self.push.hubs_changed = true;
            Err(a.error)
        };
        self.push
            .subs
            .request_answered(&a.feed_id, answer, now_ms, &cfg.policy);
        self.push.changed.insert(a.feed_id);
    }

    /// New postings first seen for `feed` (their publication dates): by a delivery
    /// (`pushed`), else by a poll at `at_ms`. A poll's count against the hub only while the
    /// subscription delivers, and only postings the hub should have delivered by then:
    /// dated after the subscription was verified and at least
    /// [`crate::control::push::DELIVERY_GRACE_MS`] before the poll.
    pub(super) fn push_first_seen(
        &mut self,
        feed: &str,
        dates: &[Option<i64>],
        pushed: bool,
        at_ms: i64,
    ) {
        let Some(cfg) = &self.push.config else {
            return;
        };
        let Some(s) = self.push.subs.of_feed(feed) else {
            return;
        };
        let n = if pushed {
            dates.len()
        } else {
            let Some(since) = s.verified_at_ms() else {
                return;
            };
            if !s.delivering(at_ms) {
                return;
            }
            let due = at_ms - crate::control::push::DELIVERY_GRACE_MS;
            dates
                .iter()
                .filter(|d| d.is_some_and(|t| t > since && t <= due))
                .count()
        };
        if n == 0 {
            return;
        }
        let half = cfg.policy.reliability_half_life_ms;
        let hub = s.hub.clone();
        let r = self.push.hubs.entry(hub.clone()).or_default();
        if pushed {
            r.saw_pushed(n, at_ms, half);
        } else {
            r.saw_polled(n, at_ms, half);
        }
        m::record_push_first_seen(if pushed { "push" } else { "poll" }, &hub, n);
        self.push.hubs_changed = true;
    }

    /// The share of each pushed feed's postings its polls must still find: its hub's miss
    /// share while its subscription delivers (feeds absent: 1, polled in full).
    pub(super) fn push_miss_shares(&self, now_ms: i64) -> HashMap<String, f64> {
        // Each hub's share once, however many feeds it serves.
        let mut by_hub: HashMap<&str, f64> = HashMap::new();
        self.push
            .subs
            .all()
            .filter(|s| s.delivering(now_ms))
            .map(|s| {
                let share = *by_hub
                    .entry(s.hub.as_str())
                    .or_insert_with(|| self.hub_miss_share(&s.hub, now_ms));
                (s.feed.clone(), share)
            })
            .collect()
    }

    /// A hub's miss share now (an unmeasured hub's is the prior's).
    fn hub_miss_share(&self, hub: &str, now_ms: i64) -> f64 {
        let half = self
            .push
            .config
            .as_ref()
            .map_or(0, |c| c.policy.reliability_half_life_ms);
        match self.push.hubs.get(hub) {
            Some(r) => r.miss_share(now_ms, half),
            None => HubRecord::default().miss_share(now_ms, half),
        }
    }

    /// A feed's push view: its subscription's state and hub, and the share of its postings
    /// its polls must find (1 without push delivering).
    pub(super) fn push_view(&self, feed: &str, now_ms: i64) -> (String, String, f64) {
        let Some(s) = self.push.subs.of_feed(feed) else {
            return (String::new(), String::new(), 1.0);
        };
        let share = if self.push.config.is_some() && s.delivering(now_ms) {
            self.hub_miss_share(&s.hub, now_ms)
        } else {
            1.0
        };
        (s.state(now_ms).to_string(), s.hub.clone(), share)
    }
}

impl<B: KvBackend> Hub<B> {
    /// Turns push on for this term: the stored subscriptions and hub records are read, and
    /// the subscriptions are driven from then on by [`Hub::push_tick`].
    pub async fn enable_push(&self, config: PushConfig) -> anyhow::Result<()> {
        let prefix = Key::Push("").prefix_of_kind();
        let mut subs = Vec::new();
        let mut after = None;
        loop {
            let page = self.store.range(prefix.clone(), after.take(), 1024).await?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = Some(last.clone());
            for (k, v) in page {
                match serde_json::from_slice::<Subscription>(&v) {
                    Ok(s) => subs.push(s),
                    Err(e) => {
                        tracing::error!(key = %String::from_utf8_lossy(&k), error = %e, "a stored WebSub subscription is unreadable; it is subscribed afresh");
                    }
                }
            }
        }
        let hubs: HashMap<String, HubRecord> = match self.store.get(Key::PushHubs.encode()?).await?
        {
            Some(v) => serde_json::from_slice(&v).unwrap_or_else(|e| {
                tracing::error!(error = %e, "the stored WebSub hub records are unreadable; hubs start unmeasured");
                HashMap::new()
            }),
            None => HashMap::new(),
        };
        tracing::info!(subscriptions = subs.len(), hubs = hubs.len(), callback_base = %config.callback_base, "WebSub push on");
        self.actor.ask(msg::EnablePush { config, subs, hubs }).await;
        Ok(())
    }

    /// One round of the subscriptions: requests due are sent, changes stored.
    pub async fn push_tick(&self) -> anyhow::Result<()> {
        let now = self.clock.now_ms();
        let writes = self.actor.ask(msg::PushTick { now_ms: now }).await;
        let mut ops = Vec::with_capacity(writes.subs.len() + 1);
        for (feed, s) in writes.subs {
            let key = Key::Push(&feed).encode()?;
            ops.push(match s {
                Some(s) => Op::Put(
                    key,
                    serde_json::to_vec(&s).expect("a subscription serializes"),
                ),
                None => Op::Delete(key),
            });
        }
        if let Some(h) = writes.hubs {
            ops.push(Op::Put(
                Key::PushHubs.encode()?,
                serde_json::to_vec(&h).expect("hub records serialize"),
            ));
        }
        for chunk in ops.chunks(64) {
            self.store.batch(chunk.to_vec()).await?;
        }
        Ok(())
    }

    /// The task stream of worker session `session` (None: no such session).
    pub async fn open_tasks(&self, session: &str) -> Option<mpsc::Receiver<pb::WorkerTask>> {
        self.actor
            .ask(msg::OpenTasks {
                session: session.to_string(),
            })
            .await
    }

    /// The loop that drives the subscriptions, every `every` of wall time until `stop`.
    pub(super) async fn push_loop(
        self: Arc<Self>,
        every: std::time::Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut failing = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            match self.push_tick().await {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    tracing::error!(error = %e, "storing WebSub subscriptions failed; retried every tick (logged again once it recovers and fails anew)");
                }
                Err(_) => {}
            }
        }
    }
}

/// The callback listener's endpoint on a leader: answers from the term's hub.
pub struct LeaderPush<B> {
    hub: Arc<Hub<B>>,
    max_body: usize,
}

impl<B: KvBackend> LeaderPush<B> {
    /// The endpoint of `hub`'s term.
    pub fn new(hub: Arc<Hub<B>>) -> Self {
        LeaderPush {
            hub,
            max_body: kairos_proto::bounds::MAX_PUSHED_BODY_BYTES,
        }
    }
}

/// The endpoint of a replica that does not lead: every request is answered 503.
pub struct NotLeading;

impl PushEndpoint for NotLeading {
    fn leading(&self) -> bool {
        false
    }
    async fn intent(&self, _: &str, _: Intent) -> bool {
        false
    }
    async fn deliver(&self, _: Delivery) -> Taken {
        Taken::Unknown
    }
}

impl<B: KvBackend> PushEndpoint for LeaderPush<B> {
    fn leading(&self) -> bool {
        true
    }

    async fn intent(&self, callback: &str, intent: Intent) -> bool {
        let now_ms = self.hub.clock.now_ms();
        self.hub
            .actor
            .ask(msg::PushIntent {
                callback: callback.to_string(),
                intent,
                now_ms,
            })
            .await
    }

    async fn deliver(&self, d: Delivery) -> Taken {
        let now_ms = self.hub.clock.now_ms();
        let target = self
            .hub
            .actor
            .ask(msg::PushTarget {
                callback: d.callback.clone(),
                now_ms,
            })
            .await;
        let (feed, topic, secret, outbox) = match target {
            Target::Unknown => return Taken::Unknown,
            Target::Lapsed => return Taken::Ignored("lapsed"),
            Target::Deliver {
                feed,
                topic,
                secret,
                outbox,
            } => (feed, topic, secret, outbox),
        };
        // Off the actor: an HMAC over megabytes must not hold every other message.
        if !secret.is_empty() {
            if let Err(e) =
                crate::push::signature::check(d.signature.as_deref(), secret.as_bytes(), &d.body)
            {
                tracing::info!(%feed, from = %d.from, error = %e, "a pushed delivery's signature failed; ignored");
                return Taken::Ignored(e.label());
            }
        }
        // A delivery names its topic in its Link header (§7); another topic than the one
        // subscribed is not this feed's content.
        let named = crate::push::links_self(&d.links);
        if named.as_deref().is_some_and(|t| t != topic) {
            tracing::info!(%feed, %topic, named = ?named, "a delivery for another topic; ignored");
            return Taken::Ignored("wrong_topic");
        }
        if d.body.len() > self.max_body {
            return Taken::Ignored("too_large");
        }
        let Some(outbox) = outbox else {
            return Taken::Ignored("no_worker");
        };
        let task = pb::WorkerTask {
            epoch: self.hub.epoch,
            task: Some(pb::worker_task::Task::Pushed(pb::PushedDocument {
                feed_id: feed,
                body: d.body.to_vec(),
                content_type: d.content_type.unwrap_or_default(),
                received_unix_ms: now_ms,
                topic,
            })),
        };
        match outbox.try_send(task) {
            Ok(()) => Taken::Accepted,
            Err(_) => Taken::Ignored("no_worker"),
        }
    }
}

/// Polls a pushed feed gets at least while its hub delivers, a day: a weekly check.
pub const PUSH_CHECK_PER_DAY: f64 = 1.0 / 7.0;

/// What [`scale_pushed`] needs of the round.
pub(super) struct PushPlanning<'a> {
    /// The share of each pushed feed's postings its polls must find.
    pub shares: &'a HashMap<String, f64>,
    /// The feeds' learned states (their documents' sizes).
    pub states: &'a HashMap<String, Arc<crate::control::feedstate::FeedState>>,
    /// The plan's settings (period, slots, metric) for the document floor.
    pub plan: &'a crate::plan::planner::PlanConfig,
    /// Periods are this many days.
    pub days_per_period: f64,
}

/// Scales each pushed feed's posting rate by the share its polls must still find (the
/// plan then spends on it what finding those is worth, and the rest on other feeds). While
/// its hub delivers (share under a half) its floor is recomputed for that share: a weekly
/// check ([`PUSH_CHECK_PER_DAY`]), or more where even the share the hub misses would
/// overflow its document between two polls; the floors set from its whole rate (the
/// configured minimum, the document's, exploration's) come back at the round after its
/// share rises, as a hub falling silent makes it.
pub(super) fn scale_pushed(
    feeds: &[crate::registry::FeedRecord],
    models: &mut [crate::plan::planner::FeedModel],
    p: &PushPlanning<'_>,
) {
    if p.shares.is_empty() {
        return;
    }
    let check = crate::plan::alloc::ceil_level(PUSH_CHECK_PER_DAY * p.days_per_period);
    for (f, m) in feeds.iter().zip(models.iter_mut()) {
        let Some(&share) = p.shares.get(&f.id) else {
            continue;
        };
        let share = share.clamp(0.0, 1.0);
        for b in &mut m.post_bins {
            *b *= share as f32;
        }
        if share >= 0.5 {
            continue;
        }
        let document = p
            .states
            .get(&f.id)
            .filter(|st| st.doc_capacity >= 2)
            .map(|st| {
                crate::plan::floor::document_level(
                    m,
                    p.plan,
                    crate::control::models::DOCUMENT_FILL * st.doc_capacity as f64,
                    true,
                )
            })
            .unwrap_or(check);
        m.min_level = m.min_level.min(check.max(document)).min(m.max_level);
    }
}

#[cfg(test)]
#[path = "push_tests.rs"]
mod tests;
