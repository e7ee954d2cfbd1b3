//! Hosts that stopped answering: a breaker per host for failures that are about the host,
//! not a route — connections refused or reset, DNS and TLS failures, timeouts.
//!
//! One feed's failures are its own business: its health backs it off ([`super::health`]).
//! But when a host goes down, each of its feeds finds out on its own, and a host of a
//! thousand feeds takes a thousand failed fetches before all of them back off. So a host
//! whose feeds fail [`DOWN_FEEDS`] times in a row — distinct feeds, with no answer of any
//! kind from the host in between (a 404 or a 503 is an answer: the host is up) — or two
//! that are at least half of its feeds, trips its breaker: every feed of the host
//! is held for [`FIRST_HOLD_MS`]. When the hold ends the host is probed by its next planned
//! fetch (half-open): one more failure before any answer trips it again for twice as long,
//! up to [`MAX_HOLD_MS`]; any answer closes the breaker and forgets the host.
//!
//! A host of one feed has no breaker: the feed's own back-off is the host's. The state is
//! kept in memory; after a restart a host still down is found again by three failures.

use std::collections::{BTreeSet, HashMap};

/// Distinct feeds of a host failing in a row that trip its breaker, however many feeds it
/// has (two where they are half of the host's feeds).
pub const DOWN_FEEDS: usize = 3;
/// The first hold of a host that does not answer.
pub const FIRST_HOLD_MS: i64 = 5 * 60_000;
/// The longest hold: a host down for days is still tried four times a day.
pub const MAX_HOLD_MS: i64 = 6 * 3_600_000;

/// One host that failed lately.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outage {
    /// Feeds that failed since the host last answered or was last held.
    pub failing: BTreeSet<String>,
    /// Held until this time, Unix ms (meaningless until the breaker first trips).
    pub until_ms: i64,
    /// Trips since the host last answered: each holds twice as long as the one before.
    pub trips: u32,
    /// The last failure, Unix ms.
    pub last_failure_ms: i64,
    /// The last failure's description, for operators.
    pub error: String,
}

/// What a failure did to its host's breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tripped {
    /// Nothing yet (or the host is held already: fetches under way when it tripped).
    No,
    /// The host is held until this time, Unix ms; `again` when it had tripped before
    /// without answering in between.
    Held {
        /// Until when.
        until_ms: i64,
        /// Not the first trip of this outage.
        again: bool,
    },
}

/// Every host that failed lately.
#[derive(Clone, Debug, Default)]
pub struct HostOutages {
    hosts: HashMap<String, Outage>,
}

impl HostOutages {
    /// Records a host-level failure of `feed` on `host` (which has `host_feeds` feeds) at
    /// `at_ms`; trips the breaker when the module's rule says so.
    pub fn failed(
        &mut self,
        host: &str,
        feed: &str,
        host_feeds: usize,
        at_ms: i64,
        error: &str,
    ) -> Tripped {
        if host_feeds <= 1 {
            return Tripped::No;
        }
        let o = self.hosts.entry(host.to_string()).or_default();
        o.last_failure_ms = o.last_failure_ms.max(at_ms);
        o.error = error.chars().take(200).collect();
        if o.trips > 0 && o.until_ms > at_ms {
            return Tripped::No;
        }
        o.failing.insert(feed.to_string());
        let n = o.failing.len();
        // Half-open: after a hold, the first failure before any answer trips it again.
        let trip = o.trips > 0 || (n >= 2 && (n >= DOWN_FEEDS || 2 * n >= host_feeds));
        if !trip {
            return Tripped::No;
        }
        let hold = FIRST_HOLD_MS
            .saturating_mul(1 << o.trips.min(16))
            .min(MAX_HOLD_MS);
        // A report's time is the worker's word: no overflow whatever it says.
        o.until_ms = at_ms.saturating_add(hold);
        o.trips += 1;
        o.failing.clear();
        Tripped::Held {
            until_ms: o.until_ms,
            again: o.trips > 1,
        }
    }

    /// The host answered (anything from HTTP, whatever its status): its breaker closes and
    /// its failures are forgotten. `true` when it had tripped.
    pub fn answered(&mut self, host: &str) -> bool {
        self.hosts.remove(host).is_some_and(|o| o.trips > 0)
    }

    /// The host's outage when it is held at `now_ms`.
    pub fn held(&self, host: &str, now_ms: i64) -> Option<&Outage> {
        self.hosts
            .get(host)
            .filter(|o| o.trips > 0 && o.until_ms > now_ms)
    }

    /// Hosts held at `now_ms`.
    pub fn held_count(&self, now_ms: i64) -> usize {
        self.hosts
            .values()
            .filter(|o| o.trips > 0 && o.until_ms > now_ms)
            .count()
    }

    /// Forgets hosts with no failure for a day that are not held (a host that failed a
    /// little and then went unfetched).
    pub fn forget_old(&mut self, now_ms: i64) {
        self.hosts.retain(|_, o| {
            o.until_ms > now_ms || now_ms.saturating_sub(o.last_failure_ms) < crate::time::DAY_MS
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_feeds_failing_in_a_row_hold_the_host_and_an_answer_closes_it() {
        let mut o = HostOutages::default();
        assert_eq!(
            o.failed("h", "a", 100, 1_000, "connection refused"),
            Tripped::No
        );
        // The same feed again is not a second feed.
        assert_eq!(
            o.failed("h", "a", 100, 2_000, "connection refused"),
            Tripped::No
        );
        assert_eq!(
            o.failed("h", "b", 100, 3_000, "connection refused"),
            Tripped::No
        );
        // An answer in between (a 404 is one) means the host is up: start again.
        assert!(!o.answered("h"));
        assert_eq!(o.failed("h", "c", 100, 4_000, "timeout"), Tripped::No);
        assert_eq!(o.failed("h", "d", 100, 5_000, "timeout"), Tripped::No);
        let at = 6_000;
        assert_eq!(
            o.failed("h", "e", 100, at, "tls"),
            Tripped::Held {
                until_ms: at + FIRST_HOLD_MS,
                again: false
            }
        );
        assert_eq!(o.held("h", at + 1).unwrap().error, "tls");
        assert_eq!(o.held_count(at + 1), 1);
        // Fetches under way when it tripped change nothing.
        assert_eq!(o.failed("h", "f", 100, at + 10, "tls"), Tripped::No);
        assert_eq!(o.held("h", at + 10).unwrap().until_ms, at + FIRST_HOLD_MS);
        // Half-open: the first failure after the hold trips it again, twice as long.
        let probe = at + FIRST_HOLD_MS + 1;
        assert!(o.held("h", probe).is_none());
        assert_eq!(
            o.failed("h", "g", 100, probe, "tls"),
            Tripped::Held {
                until_ms: probe + 2 * FIRST_HOLD_MS,
                again: true
            }
        );
        // Doubling stops at the longest hold.
        let mut t = probe;
        for _ in 0..10 {
            t = o.held("h", t).unwrap().until_ms;
            o.failed("h", "g", 100, t, "tls");
        }
        assert_eq!(o.held("h", t).unwrap().until_ms, t + MAX_HOLD_MS);
        // An answer closes it.
        assert!(o.answered("h"));
        assert!(o.held("h", t).is_none());
        assert_eq!(o.failed("h", "a", 100, t + 1, "tls"), Tripped::No);
    }

    #[test]
    fn small_hosts_trip_at_half_their_feeds_and_single_feed_hosts_never() {
        let mut o = HostOutages::default();
        assert_eq!(o.failed("one", "a", 1, 1_000, "dns"), Tripped::No);
        assert_eq!(o.failed("one", "a", 1, 2_000, "dns"), Tripped::No);
        assert!(o.held("one", 2_000).is_none());
        assert_eq!(o.failed("two", "a", 2, 1_000, "dns"), Tripped::No);
        assert!(matches!(
            o.failed("two", "b", 2, 2_000, "dns"),
            Tripped::Held { .. }
        ));
        assert_eq!(o.failed("four", "a", 4, 1_000, "dns"), Tripped::No);
        assert!(matches!(
            o.failed("four", "b", 4, 2_000, "dns"),
            Tripped::Held { .. }
        ));
        // A host that failed once and was never fetched again is forgotten after a day.
        o.forget_old(1_000 + crate::time::DAY_MS + FIRST_HOLD_MS * 2);
        assert_eq!(o.held_count(0), 0);
        assert!(o.hosts.is_empty());
        // Times at the ends of the range, and a huge error text, stay bounded.
        o.failed("far", "a", 3, i64::MAX - 1, &"x".repeat(3 << 20));
        let t = o.failed("far", "b", 3, i64::MAX - 1, "y");
        assert_eq!(
            t,
            Tripped::Held {
                until_ms: i64::MAX,
                again: false
            }
        );
        assert_eq!(o.held("far", i64::MAX - 1).unwrap().error, "y");
        o.failed("near", "a", 3, i64::MIN, "z");
        assert!(matches!(
            o.failed("near", "b", 3, i64::MIN, "z"),
            Tripped::Held { .. }
        ));
        o.forget_old(i64::MAX);
        o.forget_old(i64::MIN);
    }
}
