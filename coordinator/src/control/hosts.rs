//! What hosts told us about their capacity. A `429 Too Many Requests` or `503` (with or
//! without `Retry-After`) is first taken as about the one route that answered it: that
//! feed is held until the time it named, and its host's other feeds are not. Hosts that
//! serve thousands of independent routes (RSSHub, bridges, platform hosts) rate-limit one
//! route at a time, and holding the whole host for one of them stopped every other feed
//! there. When the answers are about the host — throttles from [`HOST_BREAKER_ROUTES`]
//! distinct feeds of it within their holds, or from at least half its feeds (a host of one
//! or two feeds) — the host's breaker trips: every feed of the host is held until the
//! time named, and the host's share of the plan halves — multiplicative decrease, as a
//! congestion controller would — recovering by doubling after each full day without a
//! throttle. The politeness cap from the workers' gap stays the ceiling throughout.
//!
//! The state is kept in memory: after a restart a throttling host is found again by its
//! next 429, at the cost of one refused fetch.

use crate::time::DAY_MS;
use std::collections::HashMap;

/// Hold when a throttle names no `Retry-After`.
const DEFAULT_HOLD_MS: i64 = 3_600_000;
/// Lowest share of its original rate a throttled host is planned at.
const MIN_FACTOR: f64 = 1.0 / 64.0;
/// Distinct feeds of a host throttled within their holds that make the throttle the
/// host's, however many feeds it has.
pub const HOST_BREAKER_ROUTES: usize = 3;

/// One route (feed) held after it was throttled, its host not (yet).
#[derive(Clone, Debug, PartialEq)]
pub struct RouteHold {
    /// No fetch of this feed before this time, Unix ms.
    pub until_ms: i64,
    /// Throttles of this feed since it was last clear.
    pub throttles: u64,
}

/// What a throttle held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The one feed that answered it.
    Route,
    /// Every feed of the host; `fresh` when the host was not held before.
    Host {
        /// The breaker has just tripped.
        fresh: bool,
    },
}

/// One throttled host.
#[derive(Clone, Debug, PartialEq)]
pub struct Throttle {
    /// No fetch before this time, Unix ms.
    pub until_ms: i64,
    /// Fetches per day the host was planned at when it first throttled.
    pub base_per_day: f64,
    /// Share of `base_per_day` it is planned at now.
    pub factor: f64,
    /// Last throttle, or last recovery step, Unix ms.
    pub last_change_ms: i64,
    /// Throttles seen since the host was last clear.
    pub throttles: u64,
}

impl Throttle {
    /// The host's cap, fetches per day.
    pub fn cap_per_day(&self) -> f64 {
        self.base_per_day * self.factor
    }
}

/// Throttle state of every host that throttled recently.
#[derive(Clone, Debug, Default)]
pub struct HostThrottles {
    hosts: HashMap<String, Throttle>,
    /// Feeds held on their own, by host (a throttle counts its host's holds).
    routes: HashMap<String, HashMap<String, RouteHold>>,
    /// Hosts that stopped answering ([`super::outages`]): held through the same plan
    /// bounds as throttled ones.
    pub down: super::outages::HostOutages,
}

impl HostThrottles {
    /// Records a throttle of `feed` on `host` (which has `host_feeds` feeds, planned at
    /// `planned_per_day` together) at `at_ms`, with an optional `Retry-After` (s): holds the
    /// feed, or the whole host when the answers are about it (the module's rule).
    pub fn throttled_route(
        &mut self,
        host: &str,
        feed: &str,
        host_feeds: usize,
        at_ms: i64,
        retry_after_s: u32,
        planned_per_day: f64,
    ) -> Held {
        let until = at_ms + hold_ms(retry_after_s);
        let held = self.routes.entry(host.to_string()).or_default();
        let r = held.entry(feed.to_string()).or_insert(RouteHold {
            until_ms: until,
            throttles: 0,
        });
        r.until_ms = r.until_ms.max(until);
        r.throttles += 1;
        let routes = held.values().filter(|r| r.until_ms > at_ms).count();
        let host_held = self.hosts.get(host).is_some_and(|t| t.until_ms > at_ms);
        if host_held || routes >= HOST_BREAKER_ROUTES || 2 * routes >= host_feeds.max(1) {
            let fresh = !self.hosts.contains_key(host);
            self.throttled(host, at_ms, retry_after_s, planned_per_day);
            Held::Host { fresh }
        } else {
            Held::Route
        }
    }

    /// Feed `feed` of `host` held on its own, if it still is at `now_ms`.
    pub fn route(&self, host: &str, feed: &str, now_ms: i64) -> Option<&RouteHold> {
        self.routes
            .get(host)?
            .get(feed)
            .filter(|r| r.until_ms > now_ms)
    }

    /// Records a throttle of the whole `host` at `at_ms` with an optional `Retry-After` (s),
    /// when the host was planned at `planned_per_day`.
    pub fn throttled(&mut self, host: &str, at_ms: i64, retry_after_s: u32, planned_per_day: f64) {
        let hold = hold_ms(retry_after_s);
        let t = self.hosts.entry(host.to_string()).or_insert(Throttle {
            until_ms: at_ms,
            base_per_day: planned_per_day.max(1.0 / 7.0),
            factor: 1.0,
            last_change_ms: at_ms,
            throttles: 0,
        });
        // One halving per hold: fetches already under way when the host's answer arrived
        // must not drive its share to the bottom at once.
        if t.throttles == 0 || at_ms >= t.until_ms {
            t.factor = (t.factor * 0.5).max(MIN_FACTOR);
            t.last_change_ms = at_ms;
        }
        t.until_ms = t.until_ms.max(at_ms + hold);
        t.throttles += 1;
    }

    /// Recovery: each host clear of throttles for a day doubles its share; a host back at
    /// its original rate is forgotten. Returns the hosts forgotten.
    pub fn recover(&mut self, now_ms: i64) -> Vec<String> {
        let mut cleared = Vec::new();
        for (h, t) in self.hosts.iter_mut() {
            while now_ms - t.last_change_ms >= DAY_MS && t.factor < 1.0 {
                t.factor = (t.factor * 2.0).min(1.0);
                t.last_change_ms += DAY_MS;
            }
            if t.factor >= 1.0 && now_ms >= t.until_ms {
                cleared.push(h.clone());
            }
        }
        for h in &cleared {
            self.hosts.remove(h);
        }
        for held in self.routes.values_mut() {
            held.retain(|_, r| r.until_ms > now_ms);
        }
        self.routes.retain(|_, held| !held.is_empty());
        self.down.forget_old(now_ms);
        cleared
    }

    /// A host's state, if throttled recently.
    pub fn get(&self, host: &str) -> Option<&Throttle> {
        self.hosts.get(host)
    }

    /// Every throttled host.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Throttle)> {
        self.hosts.iter()
    }

    /// Routes (feeds) held for their own 429/503 at `now_ms`, their host not held.
    pub fn routes_held(&self, now_ms: i64) -> usize {
        self.routes
            .values()
            .flat_map(|held| held.values())
            .filter(|r| r.until_ms > now_ms)
            .count()
    }

    /// Hosts throttled recently.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether no host is throttled.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
    }
}

/// How long a throttle holds: its `Retry-After`, or an hour without one.
fn hold_ms(retry_after_s: u32) -> i64 {
    if retry_after_s > 0 {
        retry_after_s as i64 * 1000
    } else {
        DEFAULT_HOLD_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_halves_the_host_holds_it_and_recovers_by_the_day() {
        let mut t = HostThrottles::default();
        t.throttled("h", 1_000, 120, 48.0);
        let s = t.get("h").unwrap().clone();
        assert_eq!(s.until_ms, 121_000);
        assert_eq!(s.cap_per_day(), 24.0);
        // A second 429 within the hold (already-queued fetches) does not halve again.
        t.throttled("h", 2_000, 120, 24.0);
        assert_eq!(t.get("h").unwrap().cap_per_day(), 24.0);
        // One after the hold does, and without Retry-After holds an hour.
        t.throttled("h", 200_000, 0, 24.0);
        let s = t.get("h").unwrap().clone();
        assert_eq!(s.cap_per_day(), 12.0);
        assert_eq!(s.until_ms, 200_000 + DEFAULT_HOLD_MS);
        assert_eq!(s.throttles, 3);
        assert!(t.recover(200_000 + DAY_MS - 1).is_empty());
        assert_eq!(t.get("h").unwrap().cap_per_day(), 12.0);
        assert!(t.recover(200_000 + DAY_MS).is_empty());
        assert_eq!(t.get("h").unwrap().cap_per_day(), 24.0);
        assert_eq!(t.recover(200_000 + 2 * DAY_MS), vec!["h".to_string()]);
        assert!(t.is_empty());
    }

    #[test]
    fn the_share_has_a_floor() {
        let mut t = HostThrottles::default();
        for i in 0..20 {
            t.throttled("h", i * DAY_MS, 1, 64.0);
        }
        assert_eq!(t.get("h").unwrap().cap_per_day(), 1.0);
    }

    #[test]
    fn one_throttled_route_holds_its_feed_and_several_hold_the_host() {
        let mut t = HostThrottles::default();
        // A host of a thousand routes: one answers 429 for two minutes.
        let held = t.throttled_route("hub", "r1", 1_000, 1_000, 120, 500.0);
        assert_eq!(held, Held::Route);
        assert!(t.get("hub").is_none(), "the host is not held");
        assert_eq!(t.route("hub", "r1", 2_000).unwrap().until_ms, 121_000);
        assert!(t.route("hub", "r2", 2_000).is_none());
        assert_eq!(t.routes_held(2_000), 1);
        assert_eq!(t.routes_held(121_000), 0, "the hold has ended");
        // The same route again: still its own.
        assert_eq!(
            t.throttled_route("hub", "r1", 1_000, 5_000, 120, 500.0),
            Held::Route
        );
        // A second route, then a third within their holds: the host's breaker trips once.
        assert_eq!(
            t.throttled_route("hub", "r2", 1_000, 6_000, 120, 500.0),
            Held::Route
        );
        let third = t.throttled_route("hub", "r3", 1_000, 7_000, 120, 500.0);
        assert_eq!(third, Held::Host { fresh: true });
        assert_eq!(t.get("hub").unwrap().cap_per_day(), 250.0);
        let more = t.throttled_route("hub", "r4", 1_000, 8_000, 120, 500.0);
        assert_eq!(more, Held::Host { fresh: false });
        // Route holds end with their time; an expired one no longer counts toward the host.
        t.recover(200_000);
        assert!(t.route("hub", "r1", 200_000).is_none());
        let mut t = HostThrottles::default();
        t.throttled_route("hub", "a", 1_000, 0, 60, 10.0);
        t.throttled_route("hub", "b", 1_000, 70_000, 60, 10.0);
        assert_eq!(
            t.throttled_route("hub", "c", 1_000, 80_000, 60, 10.0),
            Held::Route
        );
        // A host of one or two feeds: one throttled feed is half of it, so the host's.
        let mut t = HostThrottles::default();
        let small = t.throttled_route("blog", "only", 1, 0, 0, 4.0);
        assert_eq!(small, Held::Host { fresh: true });
        assert_eq!(t.get("blog").unwrap().until_ms, DEFAULT_HOLD_MS);
        assert_eq!(
            t.throttled_route("pair", "one", 2, 0, 0, 4.0),
            Held::Host { fresh: true }
        );
    }
}
