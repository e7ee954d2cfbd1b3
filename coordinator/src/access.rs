//! Reader access events into the per-user statistics the planner learns from.
//!
//! Each accepted event adds its user's weight to an hourly bin of the period: app-level
//! events (no feed) to the user's app histogram, feed events to the (user, feed) histogram.
//! `learn` later spreads app-level counts over the user's subscriptions. Events from unknown
//! users, for unknown feeds, or with times far outside the current window are counted and
//! skipped, never stored and never fatal.

use std::collections::{BTreeMap, HashMap, HashSet};

/// An incoming access event.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessEvent {
    /// User id.
    pub user_id: String,
    /// Feed id; empty = app-level.
    pub feed_id: String,
    /// Event time, Unix ms.
    pub unix_ms: i64,
}

/// What a batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessCounts {
    /// Events recorded.
    pub accepted: u64,
    /// Skipped: user not registered.
    pub unknown_user: u64,
    /// Skipped: feed not registered.
    pub unknown_feed: u64,
    /// Skipped: time outside the accepted window.
    pub out_of_window: u64,
}

/// Why an event is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Skip {
    OutOfWindow,
    UnknownUser,
    UnknownFeed,
}

impl AccessCounts {
    fn tally(&mut self, skip: Option<Skip>) {
        match skip {
            None => self.accepted += 1,
            Some(Skip::OutOfWindow) => self.out_of_window += 1,
            Some(Skip::UnknownUser) => self.unknown_user += 1,
            Some(Skip::UnknownFeed) => self.unknown_feed += 1,
        }
    }
}

#[derive(Debug)]
struct UserStats {
    weight: f32,
    app: Vec<f32>,
    feeds: HashMap<u32, Vec<f32>>,
}

/// One user's histograms as stored (`access/USER`): feeds by id, so the record outlives
/// the in-memory feed numbering.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StoredAccess {
    /// App-level histogram.
    pub app: Vec<f32>,
    /// Per-feed histograms.
    pub feeds: BTreeMap<String, Vec<f32>>,
}

/// Hourly access histograms per user (and per user and feed).
#[derive(Debug)]
pub struct AccessStats {
    /// Users whose histograms changed since [`Self::take_dirty`].
    dirty: HashSet<String>,
    bins: usize,
    bin_ms: i64,
    users: HashMap<String, UserStats>,
    /// Registered feeds by their number in the users' histograms.
    feeds: HashMap<String, u32>,
    /// The next feed's number: numbers are never reused, so a feed added after a removal
    /// cannot take a live feed's number and share its histograms.
    next_feed: u32,
    /// Events outside `[now − max_age, now + max_skew]` are skipped.
    max_age_ms: i64,
    max_skew_ms: i64,
}

impl AccessStats {
    /// Empty statistics with `bins` bins per `period_ms` (24 per day by default).
    pub fn new(bins: usize, period_ms: i64) -> Self {
        AccessStats {
            dirty: HashSet::new(),
            bins,
            bin_ms: period_ms / bins as i64,
            users: HashMap::new(),
            feeds: HashMap::new(),
            next_feed: 0,
            max_age_ms: 28 * 86_400_000,
            max_skew_ms: 3_600_000,
        }
    }

    /// Registers (or re-weights) a user.
    pub fn set_user(&mut self, user: &str, weight: f32) {
        let bins = self.bins;
        self.users
            .entry(user.to_string())
            .or_insert_with(|| UserStats {
                weight,
                app: vec![0.0; bins],
                feeds: HashMap::new(),
            })
            .weight = weight;
    }

    /// Registers a feed.
    pub fn set_feed(&mut self, feed: &str) {
        if !self.feeds.contains_key(feed) {
            self.feeds.insert(feed.to_string(), self.next_feed);
            self.next_feed += 1;
        }
    }

    /// Forgets a user (their later events are skipped as unknown).
    pub fn remove_user(&mut self, user: &str) {
        self.users.remove(user);
    }

    /// Forgets a feed and every user's histogram of it (stored again without it).
    pub fn remove_feed(&mut self, feed: &str) {
        let Some(i) = self.feeds.remove(feed) else {
            return;
        };
        for (name, u) in &mut self.users {
            if u.feeds.remove(&i).is_some() {
                self.dirty.insert(name.clone());
            }
        }
    }

    /// Why an event would be skipped, or `None` if it would be recorded.
    fn skip_reason(&self, e: &AccessEvent, now_ms: i64) -> Option<Skip> {
        if e.unix_ms < now_ms - self.max_age_ms || e.unix_ms > now_ms + self.max_skew_ms {
            Some(Skip::OutOfWindow)
        } else if !self.users.contains_key(&e.user_id) {
            Some(Skip::UnknownUser)
        } else if !e.feed_id.is_empty() && !self.feeds.contains_key(&e.feed_id) {
            Some(Skip::UnknownFeed)
        } else {
            None
        }
    }

    /// What [`Self::record`] would do with a batch, without recording anything.
    pub fn check(&self, events: &[AccessEvent], now_ms: i64) -> AccessCounts {
        let mut c = AccessCounts::default();
        for e in events {
            c.tally(self.skip_reason(e, now_ms));
        }
        c
    }

    /// Records a batch at time `now_ms`.
    pub fn record(&mut self, events: &[AccessEvent], now_ms: i64) -> AccessCounts {
        self.record_each(events, now_ms, |_| {})
    }

    /// Records a batch at time `now_ms`, calling `accepted` for every event recorded.
    pub fn record_each<'e>(
        &mut self,
        events: &'e [AccessEvent],
        now_ms: i64,
        mut accepted: impl FnMut(&'e AccessEvent),
    ) -> AccessCounts {
        let mut c = AccessCounts::default();
        let (bins, bin_ms) = (self.bins, self.bin_ms);
        for e in events {
            let skip = self.skip_reason(e, now_ms);
            c.tally(skip);
            if skip.is_some() {
                continue;
            }
            let bin = (e.unix_ms.rem_euclid(bin_ms * bins as i64) / bin_ms) as usize;
            let feed = self.feeds.get(&e.feed_id).copied();
            let user = self.users.get_mut(&e.user_id).expect("checked known");
            if !self.dirty.contains(&e.user_id) {
                self.dirty.insert(e.user_id.clone());
            }
            match feed {
                None => user.app[bin] += user.weight,
                Some(f) => {
                    user.feeds.entry(f).or_insert_with(|| vec![0.0; bins])[bin] += user.weight
                }
            }
            accepted(e);
        }
        c
    }

    /// The histograms of every user recorded since the last call, to be stored.
    pub fn take_dirty(&mut self) -> Vec<(String, StoredAccess)> {
        let names: HashMap<u32, &str> = self.feeds.iter().map(|(f, &i)| (i, f.as_str())).collect();
        let mut out = Vec::with_capacity(self.dirty.len());
        for user in std::mem::take(&mut self.dirty) {
            let Some(u) = self.users.get(&user) else {
                continue; // removed since
            };
            let feeds = u
                .feeds
                .iter()
                .filter_map(|(i, h)| Some((names.get(i)?.to_string(), h.clone())))
                .collect();
            out.push((
                user,
                StoredAccess {
                    app: u.app.clone(),
                    feeds,
                },
            ));
        }
        out
    }

    /// Marks users as still to be stored (their write failed).
    pub fn mark_dirty(&mut self, users: impl IntoIterator<Item = String>) {
        self.dirty.extend(users);
    }

    /// Loads a stored user's histograms; the user must be registered ([`Self::set_user`]),
    /// feeds no longer registered are dropped, histograms of another bin count ignored.
    pub fn restore(&mut self, user: &str, stored: StoredAccess) -> bool {
        let bins = self.bins;
        let Some(u) = self.users.get_mut(user) else {
            return false;
        };
        if stored.app.len() == bins {
            u.app = stored.app;
        }
        for (feed, h) in stored.feeds {
            if let (Some(&i), true) = (self.feeds.get(&feed), h.len() == bins) {
                u.feeds.insert(i, h);
            }
        }
        true
    }

    /// Drops every user's histogram of a feed `keep(user, feed)` refuses; the users
    /// affected are marked to be stored again. Returns how many histograms were dropped.
    pub fn retain_feed_histograms(&mut self, keep: impl Fn(&str, &str) -> bool) -> usize {
        let names: HashMap<u32, &str> = self.feeds.iter().map(|(f, &i)| (i, f.as_str())).collect();
        let mut dropped = 0;
        for (user, u) in &mut self.users {
            let before = u.feeds.len();
            u.feeds
                .retain(|i, _| names.get(i).is_some_and(|feed| keep(user, feed)));
            if u.feeds.len() < before {
                dropped += before - u.feeds.len();
                self.dirty.insert(user.clone());
            }
        }
        dropped
    }

    /// A user's app-level histogram.
    pub fn app_histogram(&self, user: &str) -> Option<&[f32]> {
        self.users.get(user).map(|u| u.app.as_slice())
    }

    /// A user's histogram for one feed.
    pub fn feed_histogram(&self, user: &str, feed: &str) -> Option<&[f32]> {
        let f = self.feeds.get(feed)?;
        self.users.get(user)?.feeds.get(f).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_land_in_bins_and_bad_ones_are_counted() {
        let day = 86_400_000;
        let mut s = AccessStats::new(24, day);
        s.set_user("u", 2.0);
        s.set_feed("f");
        let now = 100 * day;
        let ev = |u: &str, f: &str, t: i64| AccessEvent {
            user_id: u.into(),
            feed_id: f.into(),
            unix_ms: t,
        };
        let c = s.record(
            &[
                ev("u", "", now - day + 8 * 3_600_000 + 5),
                ev("u", "f", now - 2 * 3_600_000),
                ev("ghost", "", now),
                ev("u", "nofeed", now),
                ev("u", "", now + 2 * 3_600_000),
                ev("u", "", now - 60 * day),
            ],
            now,
        );
        assert_eq!(
            c,
            AccessCounts {
                accepted: 2,
                unknown_user: 1,
                unknown_feed: 1,
                out_of_window: 2
            }
        );
        assert_eq!(s.app_histogram("u").unwrap()[8], 2.0);
        assert_eq!(s.feed_histogram("u", "f").unwrap()[22], 2.0);
        // Stored and restored into fresh statistics: the same histograms.
        let dirty = s.take_dirty();
        assert_eq!(dirty.len(), 1);
        assert!(s.take_dirty().is_empty(), "nothing new since");
        let mut t = AccessStats::new(24, day);
        t.set_user("u", 2.0);
        t.set_feed("f");
        let (user, stored) = dirty.into_iter().next().unwrap();
        assert!(t.restore(&user, stored));
        assert_eq!(t.app_histogram("u"), s.app_histogram("u"));
        assert_eq!(t.feed_histogram("u", "f"), s.feed_histogram("u", "f"));
        assert!(!t.restore("ghost", StoredAccess::default()));
    }

    #[test]
    fn a_feed_added_after_a_removal_never_shares_a_live_feeds_histogram() {
        // The case: feeds a, b, c; remove a; add d; one access to c.
        let day = 86_400_000;
        let now = 100 * day;
        let mut s = AccessStats::new(24, day);
        s.set_user("u", 1.0);
        for f in ["a", "b", "c"] {
            s.set_feed(f);
        }
        s.remove_feed("a");
        s.set_feed("d");
        let read = AccessEvent {
            user_id: "u".into(),
            feed_id: "c".into(),
            unix_ms: now - 3_600_000,
        };
        assert_eq!(s.record(&[read], now).accepted, 1);
        let sum = |h: Option<&[f32]>| h.map_or(0.0, |h| h.iter().sum::<f32>());
        assert_eq!(sum(s.feed_histogram("u", "c")), 1.0);
        assert_eq!(sum(s.feed_histogram("u", "d")), 0.0, "nobody read d");
        // Stored under c's name only.
        let stored = s.take_dirty().pop().unwrap().1;
        assert_eq!(stored.feeds.keys().collect::<Vec<_>>(), ["c"]);
        // Removing c drops its histogram, and the user is stored again without it; a feed
        // registered again later under the same name starts empty.
        s.remove_feed("c");
        let again = s.take_dirty().pop().expect("stored again").1;
        assert!(again.feeds.is_empty());
        s.set_feed("c");
        assert_eq!(sum(s.feed_histogram("u", "c")), 0.0);
    }
}
