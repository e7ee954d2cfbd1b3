//! The worker's share of the cluster's per-minute fetch cap (`--max-fetches-per-minute`).
//!
//! The coordinator levels its plan so that no minute holds more fetches than the cap
//! (`kairos_planner::plan::crowd`), but a worker starts fetches the plan does not list:
//! catch-ups of feeds a replan finds overdue, fetches held from a spent day that open the
//! next one, first sights, the end-of-day sweep's extras. On `real-commits` at one fetch a
//! day with a cap of five a minute, those put 6,923 fetches in minutes above the cap over
//! the scored days, 2,951 of them in the ten minutes after a replan. With its allowance the
//! coordinator sends each worker a share of the cap (the cap dealt in proportion to the
//! workers' planned fetches, at least one each), and the worker holds its extra fetches to
//! it: a fetch besides the plan starts only while the minute's count, the plan's fetches
//! still queued for the rest of the minute included, is below the share; otherwise it waits
//! for a later minute ([`defer_to`]). The plan's own fetches always start: the coordinator
//! levelled them, and holding one back would only push it onto the next minute's.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// Milliseconds in a minute.
pub const MINUTE_MS: i64 = 60_000;

/// The start of the minute after the one `t_ms` falls in.
fn minute_end(t_ms: i64) -> i64 {
    (t_ms.div_euclid(MINUTE_MS) + 1) * MINUTE_MS
}

/// When a fetch of `feed_id` held back at `now_ms` tries again: at its own second of the
/// next minute (a number fixed by its id), so the fetches held together do not all try at
/// the minute's first instant, and each is tried once a minute until one has room.
pub fn defer_to(feed_id: &str, now_ms: i64) -> i64 {
    // `DefaultHasher::new()` has fixed keys: the same id gives the same second in one build.
    let mut h = std::hash::DefaultHasher::new();
    feed_id.hash(&mut h);
    minute_end(now_ms) + (h.finish() % MINUTE_MS as u64) as i64
}

/// A worker's count of the fetches it started in the current minute, against its share of
/// the cluster's per-minute cap.
#[derive(Debug, Default)]
pub struct MinuteGate {
    /// The most fetches a minute (`None`: no cap).
    share: Option<u64>,
    /// The minute counted (minutes since the epoch).
    minute: i64,
    /// Plan fetches started in the minute.
    planned: u64,
    /// Fetches besides the plan started in the minute.
    extra: u64,
    /// Plan fetches started plus those still queued for the rest of the minute, taken when
    /// the minute's first extra fetch asked (`None` until then).
    reserved: Option<u64>,
    /// Extra fetches held back to a later minute since the start, each once however many
    /// minutes it waited.
    deferred: u64,
    /// The feeds whose extra fetch is waiting for a minute with room.
    waiting: HashSet<String>,
}

impl MinuteGate {
    /// Takes the share of the cap (`None` lifts it).
    pub fn set_share(&mut self, share: Option<u64>) {
        self.share = share;
    }

    fn roll(&mut self, now_ms: i64) {
        let minute = now_ms.div_euclid(MINUTE_MS);
        if minute != self.minute {
            self.minute = minute;
            self.planned = 0;
            self.extra = 0;
            self.reserved = None;
        }
    }

    /// Counts `feed_id`'s fetch started at `now_ms`: one of the plan's, or one besides it.
    pub fn started(&mut self, now_ms: i64, planned: bool, feed_id: &str) {
        self.roll(now_ms);
        if planned {
            self.planned += 1;
        } else {
            self.extra += 1;
        }
        // A feed re-planned while its extra fetch waited may start on its plan's time.
        self.waiting.remove(feed_id);
    }

    /// Holds `feed_id`'s extra fetch, which found no room at `now_ms`, and answers when it
    /// tries again ([`defer_to`]). A fetch is counted the first time it waits.
    pub fn defer(&mut self, feed_id: &str, now_ms: i64) -> i64 {
        if !self.waiting.contains(feed_id) {
            self.waiting.insert(feed_id.to_string());
            self.deferred += 1;
        }
        defer_to(feed_id, now_ms)
    }

    /// Forgets a waiting fetch that will not start (its feed revoked, a sweep's extra whose
    /// day ended).
    pub fn forget(&mut self, feed_id: &str) {
        self.waiting.remove(feed_id);
    }

    /// The end of the current minute when a fetch besides the plan asks for room at
    /// `now_ms` and the minute's plan fetches are not reserved yet: the caller counts the
    /// plan's fetches still queued before it and [`MinuteGate::reserve`]s them. Once a
    /// minute; the plan's fetches started after that are already in the count. `None`
    /// without a share.
    pub fn unreserved(&mut self, now_ms: i64) -> Option<i64> {
        self.share?;
        self.roll(now_ms);
        self.reserved.is_none().then(|| minute_end(now_ms))
    }

    /// Reserves the minute's room for its plan fetches: those started and `pending` more.
    pub fn reserve(&mut self, pending: u64) {
        self.reserved = Some(self.planned + pending);
    }

    /// Whether a fetch besides the plan may start at `now_ms`: the minute's plan fetches
    /// (started and reserved) and its extra fetches leave room under the share. Answers
    /// `false` when they do not; the caller holds the fetch ([`MinuteGate::defer`]).
    pub fn extra_room(&mut self, now_ms: i64) -> bool {
        let Some(share) = self.share else {
            return true;
        };
        self.roll(now_ms);
        self.reserved.unwrap_or(self.planned) + self.extra < share
    }

    /// Extra fetches held back to a later minute since the start, each counted once.
    pub fn deferred_total(&self) -> u64 {
        self.deferred
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extras_fill_what_the_plan_leaves_of_the_minute() {
        let mut g = MinuteGate::default();
        g.set_share(Some(4));
        let t = 10 * MINUTE_MS;
        // One plan fetch started, two more queued for this minute: room for one extra.
        g.started(t, true, "p1");
        assert_eq!(g.unreserved(t + 5), Some(11 * MINUTE_MS));
        g.reserve(2);
        assert!(g.extra_room(t + 5));
        g.started(t + 5, false, "e1");
        // The queued plan fetches start; they were reserved, so they take no more room.
        g.started(t + 10, true, "p2");
        g.started(t + 20, true, "p3");
        assert_eq!(g.unreserved(t + 30), None, "reserved once a minute");
        assert!(!g.extra_room(t + 30));
        // Held to a later minute: counted once however often it waits, and again after
        // it started and waits anew.
        let again = g.defer("e2", t + 30);
        assert_eq!(again, defer_to("e2", t + 30));
        g.defer("e2", again);
        assert_eq!(g.deferred_total(), 1);
        g.started(again, false, "e2");
        g.defer("e2", again + MINUTE_MS);
        g.defer("e3", again);
        g.forget("e3");
        g.defer("e3", again);
        assert_eq!(g.deferred_total(), 4);
        // The next minute starts afresh.
        assert_eq!(g.unreserved(t + MINUTE_MS), Some(12 * MINUTE_MS));
        assert!(g.extra_room(t + MINUTE_MS));
    }

    #[test]
    fn a_full_minute_of_plan_leaves_no_room_and_no_share_leaves_all() {
        let mut g = MinuteGate::default();
        assert_eq!(g.unreserved(0), None);
        assert!(g.extra_room(0), "no share: no cap");
        g.set_share(Some(3));
        assert!(g.unreserved(5).is_some());
        g.reserve(3);
        assert!(!g.extra_room(5));
        assert!(!g.extra_room(6));
        g.set_share(None);
        assert!(g.extra_room(7));
    }

    #[test]
    fn deferred_fetches_spread_over_the_next_minute() {
        let now = 7 * MINUTE_MS + 59_000;
        let mut seconds = std::collections::HashSet::new();
        for i in 0..200 {
            let at = defer_to(&format!("feed-{i}"), now);
            assert!((8 * MINUTE_MS..9 * MINUTE_MS).contains(&at), "{at}");
            assert_eq!(
                at,
                defer_to(&format!("feed-{i}"), now + 1),
                "fixed by the id"
            );
            seconds.insert(at / 1000);
        }
        assert!(seconds.len() > 40, "{} distinct seconds", seconds.len());
    }
}
