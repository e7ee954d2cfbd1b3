//! WebSub subscriptions (W3C WebSub, 2018), as the leader keeps them: which feeds are
//! subscribed at which hub, what was asked and what the hub answered, and what is due
//! next. Pure and synchronous: time is an input, the callback ids and secrets are drawn by
//! the caller, and every request to a hub comes out as an [`Action`] for someone else to
//! carry out.
//!
//! One subscription per feed, at the first hub its last document named (workers report the
//! hubs, `worker/src/websub.rs`), or at the next one it names once that hub has denied the
//! subscription or failed [`FALLBACK_AFTER_FAILURES`] requests in a row ([`Wanted`]). Its
//! life at one hub:
//!
//! ```text
//!   (feed names a hub) ──subscribe──▶ Requested ──hub verifies (GET, challenge)──▶ Active
//!          ▲                              │  │                                        │
//!          │        no verification in    │  └─hub denies──▶ Denied ──(a day)──┐      │
//!          │        `verify_timeout`, or  ▼                                    │      │
//!          └────(back-off)──────────── Failed ◀──hub refused the request       │      │
//!          └───────────────────────────────────────────────────────────────────┘      │
//!   Active ──(lease nearly over)──subscribe again──▶ Requested (still delivering) ◀────┘
//!   (feed removed, or it no longer names the hub) ──unsubscribe──▶ Leaving ──verified──▶ gone
//! ```
//!
//! From Denied, or Failed after [`FALLBACK_AFTER_FAILURES`] tries, a feed whose document
//! names more hubs moves on to the next at once (a new subscription, its own callback and
//! secret); once it has tried every hub without a verification it rests as above and then
//! starts the round again. A hub that answers a request with a redirect keeps the
//! subscription as long as the document still names the hub it was asked of.
//!
//! A verification is agreed to only for what was asked: the callback must be one this
//! leader handed out, the topic the one it asked for, the mode the one pending (a hub, or
//! anyone, asking to confirm an unsubscription nobody asked for gets a 404 — WebSub §5.3).

use std::collections::HashMap;

pub use super::reliability::{HubRecord, DELIVERY_GRACE_MS, MIN_MISS_SHARE, SILENCE_AFTER_MS};

/// Requests failed in a row at one hub after which a feed naming more hubs tries the next
/// (three tries: at once, after 5 and after 10 more minutes under the default back-off).
pub const FALLBACK_AFTER_FAILURES: u32 = 3;

/// What a feed's last document asks for: its hubs in the order it names them (at least
/// one), and the topic.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub hubs: Vec<String>,
    pub topic: String,
}

impl Wanted {
    /// What a document asks for, each hub once in the order first named: a document that
    /// names a hub twice (a `<link rel="hub">` in the channel and an `atom:link` beside it)
    /// would otherwise have its feed "move on" from that hub to itself.
    pub fn new(hubs: Vec<String>, topic: String) -> Wanted {
        let mut seen = std::collections::HashSet::new();
        let hubs = hubs
            .into_iter()
            .filter(|h| seen.insert(h.clone()))
            .collect();
        Wanted { hubs, topic }
    }
}

/// Subscription timing.
#[derive(Clone, Debug, PartialEq)]
pub struct PushPolicy {
    /// Lease asked of hubs, seconds (they may grant another).
    pub lease_seconds: u64,
    /// Renew when this much of the lease is left, ms (at most half the lease granted).
    pub renew_before_ms: i64,
    /// A request whose verification has not come within this is retried, ms.
    pub verify_timeout_ms: i64,
    /// First and longest wait before a failed request is tried again, ms (doubling).
    pub retry_min_ms: i64,
    pub retry_max_ms: i64,
    /// Wait after a hub denied a subscription, ms.
    pub denied_retry_ms: i64,
    /// Half-life of a hub's measured reliability ([`HubRecord`]), ms: what it did this
    /// long ago counts half as much as what it does now.
    pub reliability_half_life_ms: i64,
}

impl Default for PushPolicy {
    fn default() -> Self {
        const HOUR: i64 = 3_600_000;
        PushPolicy {
            lease_seconds: 10 * 86_400,
            renew_before_ms: 24 * HOUR,
            verify_timeout_ms: HOUR,
            retry_min_ms: 5 * 60_000,
            retry_max_ms: 24 * HOUR,
            denied_retry_ms: 24 * HOUR,
            reliability_half_life_ms: 24 * HOUR,
        }
    }
}

/// Where a subscription stands.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Phase {
    /// Asked at `at_ms`, awaiting the hub's verification; `delivering_until_ms` is the
    /// lease still running from before (a renewal), if any.
    Requested {
        at_ms: i64,
        delivering_until_ms: Option<i64>,
    },
    /// Verified: the hub delivers until `until_ms`, a lease of `lease_ms` it granted.
    Active { until_ms: i64, lease_ms: i64 },
    /// The hub denied it for `reason`; asked again at `retry_at_ms`.
    Denied { reason: String, retry_at_ms: i64 },
    /// The last request failed (`error`); tried again at `retry_at_ms`. A renewal that
    /// failed still delivers until its lease ends (`delivering_until_ms`).
    Failed {
        error: String,
        retry_at_ms: i64,
        delivering_until_ms: Option<i64>,
    },
}

/// One feed's subscription (stored as JSON: a new leader keeps the callbacks and secrets).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Subscription {
    /// The feed.
    pub feed: String,
    /// The hub it is (to be) subscribed at.
    pub hub: String,
    /// The topic URL asked for.
    pub topic: String,
    /// The unguessable last segment of its callback URL.
    pub callback: String,
    /// The `hub.secret` sent: content pushed for it must be signed with it.
    pub secret: String,
    /// Where it stands.
    pub phase: Phase,
    /// Requests failed in a row since the last verification (the back-off doubles).
    pub failures: u32,
    /// The hub the document named that this subscription was asked of, when the hub's
    /// answer redirected it to `hub` (None: `hub` itself). The subscription stands while
    /// the document names this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub named: Option<String>,
    /// Hubs the feed moved on from since its last verification (none when it has one).
    #[serde(default)]
    pub moved_on: u32,
}

impl Subscription {
    /// The hub of the feed's document this subscription stands for.
    pub fn named_hub(&self) -> &str {
        self.named.as_deref().unwrap_or(&self.hub)
    }

    /// Whether content pushed to it now is taken (the hub was verified and its lease runs).
    pub fn delivering(&self, now_ms: i64) -> bool {
        match self.phase {
            Phase::Active { until_ms, .. } => now_ms < until_ms,
            Phase::Requested {
                delivering_until_ms: Some(u),
                ..
            }
            | Phase::Failed {
                delivering_until_ms: Some(u),
                ..
            } => now_ms < u,
            _ => false,
        }
    }

    /// When the lease delivering now was verified (None: not delivering on a verified
    /// lease).
    pub fn verified_at_ms(&self) -> Option<i64> {
        match self.phase {
            Phase::Active { until_ms, lease_ms } => Some(until_ms - lease_ms),
            Phase::Requested {
                delivering_until_ms: Some(u),
                ..
            }
            | Phase::Failed {
                delivering_until_ms: Some(u),
                ..
            } => Some(u - 365 * 86_400_000),
            _ => None,
        }
    }

    /// Its state's name, for metrics and views.
    pub fn state(&self, now_ms: i64) -> &'static str {
        match &self.phase {
            Phase::Requested { .. } if self.delivering(now_ms) => "renewing",
            Phase::Requested { .. } => "requested",
            Phase::Active { .. } if self.delivering(now_ms) => "active",
            Phase::Active { .. } => "expired",
            Phase::Denied { .. } => "denied",
            Phase::Failed { .. } => "failed",
        }
    }
}

/// A request for someone to send to a hub.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// `hub.mode=subscribe` (also a renewal).
    Subscribe {
        feed: String,
        hub: String,
        topic: String,
        callback: String,
        secret: String,
        lease_seconds: u64,
        /// The hub the feed moved on from (it denied or kept failing), when this request
        /// is to the next hub its document names.
        moved_from: Option<String>,
    },
    /// `hub.mode=unsubscribe`.
    Unsubscribe {
        feed: String,
        hub: String,
        topic: String,
        callback: String,
    },
}

/// What to answer a hub's verification of intent.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// 200 with the challenge echoed.
    Confirm,
    /// 404: not something this leader asked for.
    Refuse(&'static str),
}

/// The leader's subscriptions.
#[derive(Clone, Debug, Default)]
pub struct Subscriptions {
    /// By feed.
    by_feed: HashMap<String, Subscription>,
    /// Unsubscriptions asked, by callback, with when.
    leaving: HashMap<String, (Subscription, i64)>,
    /// Callback → feed, for the subscriptions in `by_feed`.
    callbacks: HashMap<String, String>,
}

impl Subscriptions {
    /// Subscriptions as stored (a new leader's start).
    pub fn from_stored(subs: impl IntoIterator<Item = Subscription>) -> Self {
        let mut out = Subscriptions::default();
        for s in subs {
            out.callbacks.insert(s.callback.clone(), s.feed.clone());
            out.by_feed.insert(s.feed.clone(), s);
        }
        out
    }

    /// Every feed's subscription.
    pub fn all(&self) -> impl Iterator<Item = &Subscription> {
        self.by_feed.values()
    }

    /// A feed's subscription.
    pub fn of_feed(&self, feed: &str) -> Option<&Subscription> {
        self.by_feed.get(feed)
    }

    /// The subscription a callback belongs to, if it is one of ours.
    pub fn of_callback(&self, callback: &str) -> Option<&Subscription> {
        self.callbacks
            .get(callback)
            .and_then(|f| self.by_feed.get(f))
    }

    /// Brings the subscriptions in line with what each feed names now (`wanted`: by feed;
    /// a feed absent from it, or naming no hub, wants none) and returns the requests due at
    /// `now_ms`. `fresh` draws a new (callback, secret) pair.
    pub fn reconcile(
        &mut self,
        wanted: &HashMap<String, Wanted>,
        now_ms: i64,
        policy: &PushPolicy,
        fresh: &mut dyn FnMut() -> (String, String),
    ) -> Vec<Action> {
        let mut out = Vec::new();
        // Gone, at a hub the document no longer names, or another topic: unsubscribe what
        // may be live.
        let stale: Vec<String> = self
            .by_feed
            .values()
            .filter(|s| {
                wanted.get(&s.feed).is_none_or(|w| {
                    w.topic != s.topic || !w.hubs.iter().any(|h| h == s.named_hub())
                })
            })
            .map(|s| s.feed.clone())
            .collect();
        for feed in stale {
            let s = self.by_feed.remove(&feed).expect("listed above");
            self.callbacks.remove(&s.callback);
            if matches!(s.phase, Phase::Active { .. } | Phase::Requested { .. }) {
                out.push(Action::Unsubscribe {
                    feed: s.feed.clone(),
                    hub: s.hub.clone(),
                    topic: s.topic.clone(),
                    callback: s.callback.clone(),
                });
                self.leaving.insert(s.callback.clone(), (s, now_ms));
            }
        }
        // Unsubscriptions never verified are forgotten after the timeout.
        self.leaving
            .retain(|_, (_, at)| now_ms - *at < policy.verify_timeout_ms);
        for (feed, w) in wanted {
            let Some(first) = w.hubs.first() else {
                continue;
            };
            let (due, moved_from) = match self.by_feed.get_mut(feed) {
                None => {
                    self.start(feed, first, &w.topic, 0, now_ms, fresh);
                    (true, None)
                }
                Some(s) => match s.next_hub(&w.hubs, now_ms) {
                    Some((next, moved_on)) => {
                        let from = s.hub.clone();
                        self.callbacks.remove(&s.callback);
                        self.start(feed, &next, &w.topic, moved_on, now_ms, fresh);
                        (true, Some(from))
                    }
                    None => (s.step(now_ms, policy), None),
                },
            };
            if due {
                let s = &self.by_feed[feed];
                out.push(Action::Subscribe {
                    feed: feed.clone(),
                    hub: s.hub.clone(),
                    topic: s.topic.clone(),
                    callback: s.callback.clone(),
                    secret: s.secret.clone(),
                    lease_seconds: policy.lease_seconds,
                    moved_from,
                });
            }
        }
        out
    }

    /// A new subscription of `feed` at `hub`, requested now, with its own callback and
    /// secret (in place of any the feed had).
    fn start(
        &mut self,
        feed: &str,
        hub: &str,
        topic: &str,
        moved_on: u32,
        now_ms: i64,
        fresh: &mut dyn FnMut() -> (String, String),
    ) {
        let (callback, secret) = fresh();
        self.callbacks.insert(callback.clone(), feed.to_string());
        self.by_feed.insert(
            feed.to_string(),
            Subscription {
                feed: feed.to_string(),
                hub: hub.to_string(),
                topic: topic.to_string(),
                callback,
                secret,
                phase: Phase::Requested {
                    at_ms: now_ms,
                    delivering_until_ms: None,
                },
                failures: 0,
                named: None,
                moved_on,
            },
        );
    }

    /// A hub's verification of intent (`GET callback?hub.mode=…&hub.topic=…`):
    /// confirmed only for the mode and topic this leader asked for on that callback.
    pub fn verify(
        &mut self,
        callback: &str,
        mode: &str,
        topic: &str,
        lease_seconds: Option<u64>,
        now_ms: i64,
        policy: &PushPolicy,
    ) -> Verdict {
        match mode {
            "subscribe" => {
                let Some(s) = self
                    .callbacks
                    .get(callback)
                    .and_then(|f| self.by_feed.get_mut(f))
                else {
                    return Verdict::Refuse("unknown callback");
                };
                if s.topic != topic {
                    return Verdict::Refuse("another topic");
                }
                // A hub that re-verifies an active subscription is answered as well.
                if !matches!(s.phase, Phase::Requested { .. } | Phase::Active { .. }) {
                    return Verdict::Refuse("no subscription pending");
                }
                // The hub decides the lease; none given is read as the one asked for, and
                // a zero or absurd one is kept within a year.
                let lease = lease_seconds
                    .filter(|&l| l > 0)
                    .unwrap_or(policy.lease_seconds)
                    .min(365 * 86_400);
                let lease_ms = lease as i64 * 1000;
                s.phase = Phase::Active {
                    until_ms: now_ms + lease_ms,
                    lease_ms,
                };
                s.failures = 0;
                s.moved_on = 0;
                Verdict::Confirm
            }
            "unsubscribe" => match self.leaving.get(callback) {
                Some((s, _)) if s.topic == topic => {
                    self.leaving.remove(callback);
                    Verdict::Confirm
                }
                Some(_) => Verdict::Refuse("another topic"),
                None => Verdict::Refuse("no unsubscription pending"),
            },
            _ => Verdict::Refuse("unknown mode"),
        }
    }

    /// A hub's denial (`hub.mode=denied`): the subscription rests for a day. False when it
    /// is not about one of ours.
    pub fn denied(
        &mut self,
        callback: &str,
        topic: &str,
        reason: &str,
        now_ms: i64,
        policy: &PushPolicy,
    ) -> bool {
        let Some(s) = self
            .callbacks
            .get(callback)
            .and_then(|f| self.by_feed.get_mut(f))
        else {
            return false;
        };
        if s.topic != topic {
            return false;
        }
        let reason = clipped(reason);
        s.phase = Phase::Denied {
            reason,
            retry_at_ms: now_ms + policy.denied_retry_ms,
        };
        true
    }

    /// The hub's answer to a subscribe request for `feed`: `Ok(Some(hub))` when it was
    /// redirected (307/308) and accepted at another hub, `Err` when it was refused or could
    /// not be sent. An accepted request awaits its verification.
    pub fn request_answered(
        &mut self,
        feed: &str,
        answer: Result<Option<String>, String>,
        now_ms: i64,
        policy: &PushPolicy,
    ) {
        let Some(s) = self.by_feed.get_mut(feed) else {
            return;
        };
        match answer {
            Ok(Some(moved)) => {
                // The document still names the hub asked; the redirect's target serves it.
                if s.named.is_none() {
                    s.named = Some(s.hub.clone());
                }
                s.hub = moved;
            }
            Ok(None) => {}
            Err(error) => s.fail(&error, now_ms, policy),
        }
    }
}

/// At most 256 bytes of a hub's text, cut at a character boundary.
fn clipped(s: &str) -> String {
    kairos_proto::bounds::prefix(s, 256).to_string()
}

impl Subscription {
    /// Records a failed request: tried again after a back-off that doubles with each
    /// failure in a row. A renewal that failed still has its lease and delivers until then.
    fn fail(&mut self, error: &str, now_ms: i64, policy: &PushPolicy) {
        self.failures += 1;
        let wait = policy
            .retry_min_ms
            .saturating_mul(1 << (self.failures - 1).min(20))
            .min(policy.retry_max_ms);
        let delivering_until_ms = match self.phase {
            Phase::Active { until_ms, .. } => Some(until_ms),
            Phase::Requested {
                delivering_until_ms,
                ..
            }
            | Phase::Failed {
                delivering_until_ms,
                ..
            } => delivering_until_ms,
            Phase::Denied { .. } => None,
        }
        .filter(|&u| u > now_ms);
        self.phase = Phase::Failed {
            error: clipped(error),
            retry_at_ms: now_ms + wait,
            delivering_until_ms,
        };
    }

    /// The hub to move on to, and the count of hubs moved on from then, when this one has
    /// denied the subscription or failed [`FALLBACK_AFTER_FAILURES`] requests in a row and
    /// the document (`hubs`) names others. Every hub tried without a verification: the
    /// last one's rest (its denial's day, its back-off) runs out first, then the round
    /// starts again. A subscription still delivering on an earlier lease stays.
    fn next_hub(&self, hubs: &[String], now_ms: i64) -> Option<(String, u32)> {
        if hubs.len() < 2 || self.delivering(now_ms) {
            return None;
        }
        let rest_until = match self.phase {
            Phase::Denied { retry_at_ms, .. } => retry_at_ms,
            Phase::Failed { retry_at_ms, .. } if self.failures >= FALLBACK_AFTER_FAILURES => {
                retry_at_ms
            }
            _ => return None,
        };
        let at = hubs.iter().position(|h| h == self.named_hub())?;
        let next = hubs[(at + 1) % hubs.len()].clone();
        if (self.moved_on as usize) + 1 < hubs.len() {
            Some((next, self.moved_on + 1))
        } else if now_ms >= rest_until {
            Some((next, 0))
        } else {
            None
        }
    }

    /// Moves a subscription on with time; true when a subscribe request is due now.
    fn step(&mut self, now_ms: i64, policy: &PushPolicy) -> bool {
        let request = |delivering_until_ms| Phase::Requested {
            at_ms: now_ms,
            delivering_until_ms,
        };
        match self.phase.clone() {
            Phase::Requested { at_ms, .. } => {
                if now_ms - at_ms >= policy.verify_timeout_ms {
                    // No verification came: asked again later, as after a failure.
                    self.fail("the hub did not verify the request in time", now_ms, policy);
                }
                false
            }
            Phase::Active { until_ms, lease_ms } => {
                // Renewed with a day left, or half the lease when the hub granted less
                // than two days.
                let margin = policy.renew_before_ms.min(lease_ms / 2);
                if until_ms - now_ms > margin {
                    return false;
                }
                self.phase = request((until_ms > now_ms).then_some(until_ms));
                true
            }
            Phase::Denied { retry_at_ms, .. } => {
                if now_ms < retry_at_ms {
                    return false;
                }
                self.phase = request(None);
                true
            }
            Phase::Failed {
                retry_at_ms,
                delivering_until_ms,
                ..
            } => {
                if now_ms < retry_at_ms {
                    return false;
                }
                self.phase = request(delivering_until_ms.filter(|&u| u > now_ms));
                true
            }
        }
    }
}

#[cfg(test)]
#[path = "push_tests.rs"]
mod tests;
