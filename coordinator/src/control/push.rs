//! WebSub subscriptions (W3C WebSub, 2018), as the leader keeps them: which feeds are
//! subscribed at which hub, what was asked and what the hub answered, and what is due
//! next. Pure and synchronous: time is an input, the callback ids and secrets are drawn by
//! the caller, and every request to a hub comes out as an [`Action`] for someone else to
//! carry out.
//!
//! One subscription per feed, at the first hub its last document named (workers report the
//! hubs, `worker/src/websub.rs`). Its life:
//!
//! ```text
//!   (feed names a hub) ──subscribe──▶ Requested ──hub verifies (GET, challenge)──▶ Active
//!          ▲                              │  │                                        │
//!          │        no verification in    │  └─hub denies──▶ Denied ──(a day)──┐      │
//!          │        `verify_timeout`, or  ▼                                    │      │
//!          └────(back-off)──────────── Failed ◀──hub refused the request       │      │
//!          └───────────────────────────────────────────────────────────────────┘      │
//!   Active ──(lease nearly over)──subscribe again──▶ Requested (still delivering) ◀────┘
//!   (feed removed, or it names another hub) ──unsubscribe──▶ Leaving ──verified──▶ gone
//! ```
//!
//! A verification is agreed to only for what was asked: the callback must be one this
//! leader handed out, the topic the one it asked for, the mode the one pending (a hub, or
//! anyone, asking to confirm an unsubscription nobody asked for gets a 404 — WebSub §5.3).

use std::collections::HashMap;

pub use super::reliability::{HubRecord, DELIVERY_GRACE_MS, MIN_MISS_SHARE, SILENCE_AFTER_MS};

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
}

impl Subscription {
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

    /// Brings the subscriptions in line with what each feed names now (`wanted`: feed →
    /// `(hub, topic)`; a feed absent from it wants none) and returns the requests due at
    /// `now_ms`. `fresh` draws a new (callback, secret) pair.
    pub fn reconcile(
        &mut self,
        wanted: &HashMap<String, (String, String)>,
        now_ms: i64,
        policy: &PushPolicy,
        fresh: &mut dyn FnMut() -> (String, String),
    ) -> Vec<Action> {
        let mut out = Vec::new();
        // Gone, or at another hub or topic: unsubscribe what may be live.
        let stale: Vec<String> = self
            .by_feed
            .values()
            .filter(|s| {
                wanted
                    .get(&s.feed)
                    .is_none_or(|(h, t)| *h != s.hub || *t != s.topic)
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
        for (feed, (hub, topic)) in wanted {
            let due = match self.by_feed.get_mut(feed) {
                None => {
                    let (callback, secret) = fresh();
                    self.callbacks.insert(callback.clone(), feed.clone());
                    self.by_feed.insert(
                        feed.clone(),
                        Subscription {
                            feed: feed.clone(),
                            hub: hub.clone(),
                            topic: topic.clone(),
                            callback,
                            secret,
                            phase: Phase::Requested {
                                at_ms: now_ms,
                                delivering_until_ms: None,
                            },
                            failures: 0,
                        },
                    );
                    true
                }
                Some(s) => s.step(now_ms, policy),
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
                });
            }
        }
        out
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
            Ok(Some(moved)) => s.hub = moved,
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
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn wanted(pairs: &[(&str, &str, &str)]) -> HashMap<String, (String, String)> {
        pairs
            .iter()
            .map(|(f, h, t)| (f.to_string(), (h.to_string(), t.to_string())))
            .collect()
    }

    fn draws() -> impl FnMut() -> (String, String) {
        let mut n = 0;
        move || {
            n += 1;
            (format!("cb{n}"), format!("secret{n}"))
        }
    }

    #[test]
    fn subscribe_verify_renew_and_leave() {
        let p = PushPolicy::default();
        let mut fresh = draws();
        let mut subs = Subscriptions::default();
        let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
        let acts = subs.reconcile(&w, 0, &p, &mut fresh);
        assert_eq!(
            acts,
            vec![Action::Subscribe {
                feed: "a".into(),
                hub: "https://hub/".into(),
                topic: "https://a/feed".into(),
                callback: "cb1".into(),
                secret: "secret1".into(),
                lease_seconds: p.lease_seconds,
            }]
        );
        // Nothing more is due while the verification is awaited.
        assert!(subs.reconcile(&w, 10 * 60_000, &p, &mut fresh).is_empty());
        assert!(!subs.of_feed("a").unwrap().delivering(60_000));
        // The wrong topic, mode or callback is refused; the right one confirmed.
        assert_eq!(
            subs.verify("cb1", "subscribe", "https://evil/", Some(3600), H / 2, &p),
            Verdict::Refuse("another topic")
        );
        assert_eq!(
            subs.verify("cb9", "subscribe", "https://a/feed", Some(3600), H / 2, &p),
            Verdict::Refuse("unknown callback")
        );
        assert_eq!(
            subs.verify("cb1", "unsubscribe", "https://a/feed", None, H / 2, &p),
            Verdict::Refuse("no unsubscription pending")
        );
        assert_eq!(
            subs.verify(
                "cb1",
                "subscribe",
                "https://a/feed",
                Some(5 * 86_400),
                H / 2,
                &p
            ),
            Verdict::Confirm
        );
        let s = subs.of_feed("a").unwrap();
        assert!(s.delivering(H));
        assert_eq!(s.state(H), "active");
        // Renewed a day before the 5-day lease ends, delivering meanwhile.
        let lease_end = H / 2 + 5 * 86_400_000;
        assert!(subs
            .reconcile(&w, lease_end - 25 * H, &p, &mut fresh)
            .is_empty());
        let renew = subs.reconcile(&w, lease_end - 23 * H, &p, &mut fresh);
        assert!(matches!(&renew[..], [Action::Subscribe { callback, .. }] if callback == "cb1"));
        assert_eq!(
            subs.of_feed("a").unwrap().state(lease_end - 22 * H),
            "renewing"
        );
        // The feed no longer names the hub: unsubscribed, and that verification confirmed.
        let gone = subs.reconcile(&HashMap::new(), lease_end - 20 * H, &p, &mut fresh);
        assert!(matches!(&gone[..], [Action::Unsubscribe { callback, .. }] if callback == "cb1"));
        assert!(subs.of_feed("a").is_none());
        assert_eq!(
            subs.verify(
                "cb1",
                "unsubscribe",
                "https://a/feed",
                None,
                lease_end - 20 * H,
                &p
            ),
            Verdict::Confirm
        );
        assert_eq!(
            subs.verify(
                "cb1",
                "unsubscribe",
                "https://a/feed",
                None,
                lease_end - 20 * H,
                &p
            ),
            Verdict::Refuse("no unsubscription pending"),
            "confirmed once"
        );
    }

    #[test]
    fn failures_back_off_denials_rest_and_silence_times_out() {
        let p = PushPolicy::default();
        let mut fresh = draws();
        let mut subs = Subscriptions::default();
        let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
        subs.reconcile(&w, 0, &p, &mut fresh);
        // Refused three times: 5, 10, 20 minutes between tries.
        let mut t = 0;
        for (i, wait) in [5, 10, 20].iter().enumerate() {
            subs.request_answered("a", Err("HTTP 500".into()), t, &p);
            assert!(
                subs.reconcile(&w, t + wait * 60_000 - 1, &p, &mut fresh)
                    .is_empty(),
                "try {i}"
            );
            t += wait * 60_000;
            assert_eq!(subs.reconcile(&w, t, &p, &mut fresh).len(), 1, "try {i}");
        }
        // Many failures wait a day at most.
        for _ in 0..30 {
            subs.request_answered("a", Err("HTTP 500".into()), t, &p);
        }
        match &subs.of_feed("a").unwrap().phase {
            Phase::Failed { retry_at_ms, .. } => assert_eq!(*retry_at_ms - t, p.retry_max_ms),
            other => panic!("{other:?}"),
        }
        // A denial rests a day; a denial for another topic or callback is ignored.
        let mut subs = Subscriptions::default();
        subs.reconcile(&w, 0, &p, &mut fresh);
        let cb = subs.of_feed("a").unwrap().callback.clone();
        assert!(!subs.denied(&cb, "https://other/", "no", 1, &p));
        assert!(!subs.denied("nope", "https://a/feed", "no", 1, &p));
        assert!(subs.denied(&cb, "https://a/feed", "topic not allowed", 1, &p));
        assert_eq!(subs.of_feed("a").unwrap().state(2), "denied");
        assert!(subs.reconcile(&w, 24 * H, &p, &mut fresh).is_empty());
        assert_eq!(subs.reconcile(&w, 24 * H + 1, &p, &mut fresh).len(), 1);
        // A hub that never verifies: the request fails after the timeout, is tried again.
        let mut subs = Subscriptions::default();
        subs.reconcile(&w, 0, &p, &mut fresh);
        assert!(subs.reconcile(&w, H, &p, &mut fresh).is_empty());
        assert_eq!(subs.of_feed("a").unwrap().state(H), "failed");
        assert_eq!(subs.reconcile(&w, H + 5 * 60_000, &p, &mut fresh).len(), 1);
    }

    #[test]
    fn a_short_lease_is_renewed_at_its_half_and_a_failed_renewal_still_delivers() {
        let p = PushPolicy::default();
        let mut fresh = draws();
        let mut subs = Subscriptions::default();
        let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
        subs.reconcile(&w, 0, &p, &mut fresh);
        // The hub grants an hour, not the ten days asked.
        assert_eq!(
            subs.verify("cb1", "subscribe", "https://a/feed", Some(3600), 0, &p),
            Verdict::Confirm
        );
        assert!(subs.reconcile(&w, H / 2 - 1, &p, &mut fresh).is_empty());
        assert_eq!(subs.reconcile(&w, H / 2, &p, &mut fresh).len(), 1);
        subs.request_answered("a", Err("HTTP 503".into()), H / 2, &p);
        let s = subs.of_feed("a").unwrap();
        assert_eq!(s.state(H / 2 + 1), "failed");
        assert!(s.delivering(H - 1), "the lease granted still runs");
        assert!(!s.delivering(H));
    }

    #[test]
    fn a_redirected_request_and_a_moved_hub() {
        let p = PushPolicy::default();
        let mut fresh = draws();
        let mut subs = Subscriptions::default();
        let w = wanted(&[("a", "https://hub/", "https://a/feed")]);
        subs.reconcile(&w, 0, &p, &mut fresh);
        subs.request_answered("a", Ok(Some("https://hub2/".into())), 1, &p);
        assert_eq!(subs.of_feed("a").unwrap().hub, "https://hub2/");
        assert_eq!(
            subs.verify("cb1", "subscribe", "https://a/feed", Some(3600), 2, &p),
            Verdict::Confirm
        );
        // The document now names another hub: unsubscribed at the old, subscribed anew.
        let w2 = wanted(&[("a", "https://hub3/", "https://a/feed")]);
        let acts = subs.reconcile(&w2, 3, &p, &mut fresh);
        assert!(
            matches!(&acts[0], Action::Unsubscribe { hub, callback, .. } if hub == "https://hub2/" && callback == "cb1")
        );
        assert!(
            matches!(&acts[1], Action::Subscribe { hub, callback, .. } if hub == "https://hub3/" && callback == "cb2")
        );
        assert!(subs.of_callback("cb1").is_none());
        assert_eq!(subs.of_callback("cb2").unwrap().feed, "a");
        // A restart reads them back.
        let again = Subscriptions::from_stored(subs.all().cloned());
        assert_eq!(again.of_callback("cb2"), subs.of_callback("cb2"));
    }
}
