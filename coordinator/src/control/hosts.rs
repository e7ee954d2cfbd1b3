//! What hosts told us about their capacity: a `429 Too Many Requests` or `503` (with or
//! without `Retry-After`) holds every feed of the host until the time it named, and halves
//! the host's share of the plan — multiplicative decrease, as a congestion controller
//! would — which recovers by doubling after each full day without a throttle. The
//! politeness cap from the workers' gap stays the ceiling throughout.
//!
//! The state is kept in memory: after a restart a throttling host is found again by its
//! next 429, at the cost of one refused fetch.

use std::collections::HashMap;

const DAY_MS: i64 = 86_400_000;
/// Hold when a throttle names no `Retry-After`.
const DEFAULT_HOLD_MS: i64 = 3_600_000;
/// Lowest share of its original rate a throttled host is planned at.
const MIN_FACTOR: f64 = 1.0 / 64.0;

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
}

impl HostThrottles {
    /// Records a throttle of `host` at `at_ms` with an optional `Retry-After` (s), when the
    /// host was planned at `planned_per_day`.
    pub fn throttled(&mut self, host: &str, at_ms: i64, retry_after_s: u32, planned_per_day: f64) {
        let hold = if retry_after_s > 0 {
            retry_after_s as i64 * 1000
        } else {
            DEFAULT_HOLD_MS
        };
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

    /// Hosts throttled recently.
    pub fn len(&self) -> usize {
        self.hosts.len()
    }

    /// Whether no host is throttled.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty()
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
}
