//! The worker's fetch schedule: which feed to fetch when, from its versioned assignment.
//!
//! A feed's fetch times are `origin + offset_i + k·period`. The schedule keeps one pending
//! fetch per feed in a min-heap keyed by due time; [`Schedule::pop_due`] hands out every
//! fetch due by `now` and queues each feed's next one. Per-host politeness: two fetches of
//! one host start at least `min_host_gap` apart, so a fetch whose host was just used is
//! pushed back (and reported late) rather than sent. Assignments are desired state with a
//! monotonic version: a snapshot replaces everything, a delta upserts and revokes, and
//! anything not newer than what was applied is ignored. A daily allowance from the
//! coordinator ([`crate::allowance`]) caps the fetches started on each UTC day, and an
//! hour before each day ends the room the day has left is given to the fetches due in the
//! next day's first hours ([`SWEEP_MS`], [`SWEEP_WIDE_GAP_SHARE`], [`SWEEP_FAR_MS`]), and
//! what they cannot take to fetches besides the plan, half-way through feeds' gaps. A
//! fetch whose time has passed when a plan or the sweep reaches it starts at its feed's
//! own phase in the next few minutes ([`catch_up_at`]), not with every other such fetch
//! at that instant. With a share of the cluster's per-minute cap ([`crate::minute_gate`]),
//! every fetch besides the plan's (a catch-up, a held fetch, a first sight, a sweep's extra)
//! starts only in a minute with room. Time is an input (simulated Unix ms), so tests drive
//! it directly.

use crate::allowance::{Allowance, DayGate, DAY_MS};
pub use crate::feed_times::FeedTimes;
use crate::minute_gate::MinuteGate;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

#[path = "schedule_sweep.rs"]
mod sweep;
use sweep::next_sweep;
pub use sweep::{SWEEP_FAR_MS, SWEEP_GAP_SHARE, SWEEP_MS, SWEEP_WIDE_GAP_SHARE};

/// The most a fetch that is overdue when its plan arrives waits past the plan's arrival: a
/// replan reaches every worker at one instant, and the feeds it finds overdue (their last
/// fetch a whole gap ago) were all fetched at that instant. On `real-commits` at half a
/// fetch a day over days 14-55, 681 fetches started at 00:00:00 and 64-234 at each of the
/// 02, 04, 06 and 08:00:00 replans, on every worker of a fleet at once. So each such fetch
/// starts at a phase of its own ([`catch_up_at`]), within this and
/// [`CATCH_UP_SPREAD_GAP_SHARE`] of its gap after the plan's arrival.
pub const CATCH_UP_SPREAD_MS: i64 = 10 * 60_000;

/// The overdue fetch's wait past the plan's arrival is at most this share of its gap, so
/// busy feeds are not held by the spread longer than their own rhythm allows: a minute for
/// a feed fetched every half hour; from four fetches a day down, the ten minutes bind.
pub const CATCH_UP_SPREAD_GAP_SHARE: i64 = 32;

/// When `feed_id`'s fetch, overdue when a plan spacing its fetches `gap_ms` apart arrives
/// at `now_ms`, starts: the first instant at or after now whose remainder modulo the
/// window (`min(CATCH_UP_SPREAD_MS, gap_ms / 32)`) is the feed's phase, a number fixed by
/// its id. Feeds overdue together start spread over the window, and a replan that arrives
/// before the fetch has started, its spacing unchanged, gives it the same time or an
/// earlier one, never a later.
pub fn catch_up_at(feed_id: &str, gap_ms: i64, now_ms: i64) -> i64 {
    use std::hash::{Hash, Hasher};
    let window = CATCH_UP_SPREAD_MS.min(gap_ms / CATCH_UP_SPREAD_GAP_SHARE);
    if window <= 0 {
        return now_ms;
    }
    // `DefaultHasher::new()` has fixed keys: the same id gives the same phase in one build.
    let mut h = std::hash::DefaultHasher::new();
    feed_id.hash(&mut h);
    let phase = (h.finish() % window as u64) as i64;
    now_ms + (phase - now_ms).rem_euclid(window)
}

/// A fetch to start now.
#[derive(Clone, Debug, PartialEq)]
pub struct Due {
    /// Feed id.
    pub feed_id: String,
    /// When the plan wanted it (ms).
    pub planned_ms: i64,
    /// A fetch besides the plan's times (a catch-up, a fetch held from an earlier day, a
    /// first sight, a sweep's extra): what a share of the per-minute cap holds back.
    pub besides_plan: bool,
}

/// Why an assignment update was not applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpdateError {
    /// Not newer than the applied version.
    #[error("stale assignment version {got} (applied {applied})")]
    Stale { got: u64, applied: u64 },
    /// A feed with a non-positive period.
    #[error("feed `{0}` has a non-positive period")]
    BadPeriod(String),
}

/// The pending fetches of the assigned feeds.
#[derive(Debug, Default)]
pub struct Schedule {
    feeds: HashMap<String, (FeedTimes, u64)>,
    /// (due, generation, feed): entries whose generation is not the feed's are stale.
    heap: BinaryHeap<Reverse<(i64, u64, i64, String)>>,
    host_free_at: HashMap<String, i64>,
    /// When each feed was last handed out, so a re-assignment does not fetch it again
    /// right away.
    last_out: HashMap<String, i64>,
    /// Feeds with an expedited fetch not yet handed out, and when it is due (it survives
    /// re-assignment).
    expedited: HashMap<String, i64>,
    /// Feeds whose queued fetch is a catch-up between the plan's times (see `first_due`).
    off_plan: HashSet<String>,
    /// Feeds whose queued fetch was held from an earlier day by the allowance (see
    /// `pop_due`).
    held: HashSet<String>,
    /// Feeds whose last fetch was their first sight (an expedited fetch). The coordinator
    /// counts a first sight besides the plan's fetches of the day, so a plan time right
    /// after it is moved to half a gap later rather than dropped (see `first_due`).
    first_seen: HashSet<String>,
    min_host_gap_ms: i64,
    applied: u64,
    generation: u64,
    /// The day's allowance and the fetches started against it.
    gate: DayGate,
    /// When the next end-of-day sweep is due (with an allowance; see [`SWEEP_MS`]).
    sweep_at: Option<i64>,
    /// Fetches besides the plan's, from the end-of-day sweep (`fill`): (due, the end of the
    /// day it is for, feed). A feed's queued plan time stays as it is.
    extras: BinaryHeap<Reverse<(i64, i64, String)>>,
    /// The minute's fetches against this worker's share of the per-minute cap.
    minutes: MinuteGate,
}

impl Schedule {
    /// An empty schedule with a politeness gap between fetches of one host.
    pub fn new(min_host_gap_ms: i64) -> Self {
        Schedule {
            min_host_gap_ms: min_host_gap_ms.max(0),
            ..Default::default()
        }
    }

    /// The applied assignment version.
    pub fn version(&self) -> u64 {
        self.applied
    }

    /// Starts a new coordinator session, whose versions count from 1 again: the next
    /// update is accepted whatever its version (the session's snapshot comes first).
    pub fn begin_session(&mut self) {
        self.applied = 0;
    }

    /// Feeds currently assigned.
    pub fn len(&self) -> usize {
        self.feeds.len()
    }

    /// Whether no feed is assigned.
    pub fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }

    fn check(&self, version: u64, feeds: &[FeedTimes]) -> Result<(), UpdateError> {
        if version <= self.applied {
            return Err(UpdateError::Stale {
                got: version,
                applied: self.applied,
            });
        }
        match feeds.iter().find(|f| f.period_ms <= 0) {
            Some(f) => Err(UpdateError::BadPeriod(f.feed_id.clone())),
            None => Ok(()),
        }
    }

    /// Tells the schedule of a fetch of `feed_id` at `at_ms` it may not have made itself
    /// (the coordinator's record of the feed's last answered fetch, sent with an
    /// assignment), and whether that fetch was the feed's first sight. Call it before
    /// applying the update that carries it. A later fetch than the schedule knows of
    /// becomes the one the feed's next fetch is spaced from ([`Schedule::apply_delta`]'s
    /// catch-up and half-gap rules); an older one changes nothing.
    ///
    /// Without it, a worker taking a feed over (hosts dealt again, a restart) knew no
    /// last fetch and waited for the plan's next time, and while the models learn every
    /// replan may move that time again: quiet feeds went most of a simulated day unfetched
    /// after a scale-up in the scaling test.
    pub fn note_last_fetch(&mut self, feed_id: &str, at_ms: i64, first_sight: bool) {
        if self.last_out.get(feed_id).is_some_and(|&t| t >= at_ms) {
            return;
        }
        self.last_out.insert(feed_id.to_string(), at_ms);
        if first_sight {
            self.first_seen.insert(feed_id.to_string());
        } else {
            self.first_seen.remove(feed_id);
        }
    }

    /// Replaces the whole assignment.
    pub fn apply_snapshot(
        &mut self,
        version: u64,
        feeds: Vec<FeedTimes>,
        now_ms: i64,
    ) -> Result<(), UpdateError> {
        self.check(version, &feeds)?;
        self.feeds.clear();
        self.heap.clear();
        self.insert_all(feeds, now_ms);
        self.applied = version;
        Ok(())
    }

    /// Upserts some feeds and revokes others.
    pub fn apply_delta(
        &mut self,
        version: u64,
        upserts: Vec<FeedTimes>,
        removed: &[String],
        now_ms: i64,
    ) -> Result<(), UpdateError> {
        self.check(version, &upserts)?;
        for id in removed {
            // Its heap entry becomes stale and is skipped when popped.
            self.feeds.remove(id);
            self.last_out.remove(id);
            self.first_seen.remove(id);
            self.held.remove(id);
            self.minutes.forget(id);
        }
        self.insert_all(upserts, now_ms);
        self.applied = version;
        Ok(())
    }

    /// Whether a queued entry of generation `g` is the feed's current one (a re-assigned
    /// or expedited feed leaves its older entries in the heap, stale).
    fn is_live(&self, g: u64, id: &str) -> bool {
        self.feeds.get(id).is_some_and(|(_, cur)| *cur == g)
    }

    /// Fetches the day's allowance has room for beyond those queued for the rest of the
    /// day, one per feed (`None` without an allowance).
    fn spare_today(&mut self, now_ms: i64) -> Option<u64> {
        self.spare_and_queued(now_ms, &HashSet::new())
            .map(|(spare, _)| spare)
    }

    /// [`Self::spare_today`], and when each of `ids`' live entry is queued (the earliest,
    /// if more), where it has one: one pass over the heap for both.
    fn spare_and_queued(
        &mut self,
        now_ms: i64,
        ids: &HashSet<&str>,
    ) -> Option<(u64, HashMap<String, i64>)> {
        let day_end = day_end(now_ms);
        let room = self.gate.room(now_ms)?;
        let mut due_today = 0u64;
        let mut queued: HashMap<String, i64> = HashMap::new();
        for Reverse((due, g, _, id)) in &self.heap {
            if !self.is_live(*g, id) {
                continue;
            }
            due_today += u64::from(*due < day_end);
            if ids.contains(id.as_str()) {
                let t = queued.entry(id.clone()).or_insert(*due);
                *t = (*t).min(*due);
            }
        }
        let extras = self
            .extras
            .iter()
            .filter(|Reverse((due, ..))| *due < day_end)
            .count() as u64;
        Some((room.saturating_sub(due_today + extras), queued))
    }

    /// Queues a re-assigned feed's first fetch ([`Self::first_due`]). A catch-up due today
    /// takes one of `spare` (when counted), unless it replaces the feed's own fetch already
    /// queued for today (`queued`, its live entry's time: that fetch was counted when
    /// `spare` was). With none left the feed is queued at its plan's next time, or at the
    /// time it was queued for already if that comes first: each replan of a feed fetched
    /// every few days moves its times a little, and taken at the new plan's word a deferred
    /// catch-up moved later at every replan (`startstop` at half a fetch a day: a feed planned
    /// every four to six days went eleven days unfetched while it was overdue).
    fn insert(&mut self, f: FeedTimes, now_ms: i64, spare: &mut Option<u64>, queued: Option<i64>) {
        self.generation += 1;
        let day_end = day_end(now_ms);
        let first = self.first_due(&f, now_ms).map(|(due, on_plan)| {
            if on_plan || due >= day_end || queued.is_some_and(|q| q < day_end) {
                return (due, on_plan);
            }
            match spare {
                Some(0) => f.next_after(now_ms - 1).map_or((due, on_plan), |n| {
                    match queued.filter(|&q| q >= now_ms && q < n) {
                        // Still a catch-up (off the new plan): its half-gap rule holds.
                        Some(q) => (q, false),
                        None => (n, true),
                    }
                }),
                Some(n) => {
                    *n -= 1;
                    (due, on_plan)
                }
                None => (due, on_plan),
            }
        });
        if let Some(&at) = self.expedited.get(&f.feed_id) {
            self.heap
                .push(Reverse((at, self.generation, at, f.feed_id.clone())));
        } else if let Some((due, on_plan)) = first {
            self.held.remove(&f.feed_id);
            if on_plan {
                self.off_plan.remove(&f.feed_id);
            } else {
                self.off_plan.insert(f.feed_id.clone());
            }
            self.heap
                .push(Reverse((due, self.generation, due, f.feed_id.clone())));
        }
        self.feeds.insert(f.feed_id.clone(), (f, self.generation));
    }

    /// Inserts re-assigned feeds. Under an allowance of at most a fetch per feed a day,
    /// their catch-ups due today go ahead only while the day has room beyond one fetch for
    /// each feed with a fetch still due today (counted before the update), in the update's
    /// order, or where the feed itself had a fetch still due today (the catch-up takes its
    /// place); the others wait for their plan's next time, or the time they were queued for
    /// if that is sooner. A catch-up is a fetch the old plan did not budget: taken beyond the
    /// allowance it holds one of the day's planned fetches to midnight, and those then open
    /// the next day, which has its own plan to spend. On `real-commits`' 85 registry feeds
    /// at half a fetch a day, catch-ups were a third of all fetches and half of the rest
    /// started at 00:00 instead of at their planned hours. The count is loose on purpose
    /// (a feed with several fetches left today counts once): counting every planned fetch
    /// turned away catch-ups worth more than the evening fetches they would have pushed
    /// past midnight (`real-commits` at one a day, 377.2 min against 366.9; docs/EXPERIMENTS.md).
    fn insert_all(&mut self, feeds: Vec<FeedTimes>, now_ms: i64) {
        // Only where the day's allowance is at most one fetch per feed: there most feeds
        // come back days later, and a backlog held to midnight stays. Above it a feed's
        // next fetch is hours away, replans skip fetches the catch-ups make up for, and
        // holding catch-ups back left days short (`real-commits` at two a day: four days
        // at 0.960-0.977 of the budget).
        // Counted as the update leaves the assignment: a snapshot has cleared it already.
        let after = self.feeds.len()
            + feeds
                .iter()
                .filter(|f| !self.feeds.contains_key(&f.feed_id))
                .count();
        // With the room, where the updated feeds stand queued now.
        let (mut spare, queued) = if self.about_daily_for(after) {
            let ids: HashSet<&str> = feeds.iter().map(|f| f.feed_id.as_str()).collect();
            match self.spare_and_queued(now_ms, &ids) {
                Some((spare, queued)) => (Some(spare), queued),
                None => (None, HashMap::new()),
            }
        } else {
            (None, HashMap::new())
        };
        for f in feeds {
            let q = queued.get(&f.feed_id).copied();
            self.insert(f, now_ms, &mut spare, q);
        }
    }

    /// Whether the day's allowance is at most one fetch per assigned feed: most feeds come
    /// back days later, and a day has no slack to take a fetch beyond its plan.
    fn about_daily(&self) -> bool {
        self.about_daily_for(self.feeds.len())
    }

    /// [`Self::about_daily`] for an assignment of `feeds` feeds.
    fn about_daily_for(&self, feeds: usize) -> bool {
        self.gate
            .allowance()
            .is_some_and(|a| a.later_days as usize <= feeds)
    }

    /// A re-assigned feed's first fetch, and whether it is one of the plan's times. The
    /// plan changes every replan while the models learn, and a new plan's times are not the
    /// old one's: taken naively, a slot the new plan moved earlier than now is lost, and one
    /// it put right after a fetch just made is an extra fetch. So, with `gap` the new plan's
    /// spacing around its next time:
    /// * a next time within the first half of the gap after the last fetch is skipped (the
    ///   old plan already served that gap), unless that fetch was the feed's first sight:
    ///   the coordinator paced it besides the plan's fetches (`hub::pacing`), so the time
    ///   moves to half a gap after it instead (skipped, a new population's plan fetches
    ///   fell right after the first sights and day 0 at two fetches a day spent 0.54 of its
    ///   budget on `real-commits`);
    /// * a feed whose last fetch is a whole gap ago before the next time is overdue: it is
    ///   fetched at `last + gap` (or, when that has passed, at [`catch_up_at`] from now,
    ///   unless the plan's next time comes first), off the plan, and the plan's next time after
    ///   that catch-up is again subject to the half-gap rule ([`Schedule::pop_due`]);
    ///   except a timer feed ([`FeedTimes::timed`]) whose next time comes within half a
    ///   gap after the catch-up would start: that time sits just after the feed's window,
    ///   and the catch-up would come before the window's postings and skip the time that
    ///   finds them (on `digests` at four a day, 0.92-0.98 of the delay with the catch-up,
    ///   docs/EXPERIMENTS.md "Feeds on a timer at two clock times"). Counted from the start,
    ///   not from `last + gap`: a feed found overdue starts at the replan, hours after
    ///   `last + gap`, and was caught up there before its window (`timers` at four a day,
    ///   timer feeds' postings waited 17 → 29 min on average once catch-ups were spread).
    ///
    /// Both keep replans from spending fetches the plan does not have, or losing ones it has.
    fn first_due(&self, f: &FeedTimes, now_ms: i64) -> Option<(i64, bool)> {
        let next = f.next_after(now_ms - 1)?;
        let Some(&last) = self.last_out.get(&f.feed_id) else {
            return Some((next, true));
        };
        let gap = f.gap_to(next);
        if next - last < gap / 2 {
            if self.first_seen.contains(&f.feed_id) {
                return Some(((last + gap / 2).max(now_ms), true));
            }
            return f.next_after(next).map(|t| (t, true));
        }
        let catch_up = last + gap;
        // Past already when the plan arrives: the feed's own phase after now, so the feeds
        // this replan finds overdue do not all start at the instant it lands.
        let at = if catch_up < now_ms {
            catch_up_at(&f.feed_id, gap, now_ms)
        } else {
            catch_up
        };
        // A timer feed's time sits just after its window: a catch-up within half a gap
        // before it would come before the window's postings and skip the time that finds
        // them (`pop_due`'s half-gap rule), counted from when the catch-up would start.
        let imminent = f.timed && next - at < gap / 2;
        if catch_up < next && !imminent && at < next {
            Some((at, false))
        } else {
            Some((next, true))
        }
    }

    /// Moves a feed's next fetch to `at_ms` (a feed never fetched is fetched at once to
    /// learn it); its regular times resume after that fetch. No-op for unknown feeds.
    pub fn expedite(&mut self, feed_id: &str, at_ms: i64) {
        if let Some((times, _)) = self.feeds.get(feed_id) {
            let times = times.clone();
            // A new generation makes the feed's queued entry stale: one chain per feed.
            self.generation += 1;
            self.expedited.insert(feed_id.to_string(), at_ms);
            self.heap.push(Reverse((
                at_ms,
                self.generation,
                at_ms,
                feed_id.to_string(),
            )));
            self.feeds
                .insert(feed_id.to_string(), (times, self.generation));
        }
    }

    /// Takes the coordinator's daily allowance ([`crate::allowance`]); `None` lifts it.
    pub fn set_allowance(&mut self, allowance: Option<Allowance>, now_ms: i64) {
        match allowance {
            Some(a) => {
                self.gate.set(a, now_ms);
                self.minutes.set_share(a.per_minute);
                if self.sweep_at.is_none() {
                    self.sweep_at = Some(next_sweep(now_ms));
                }
            }
            None => {
                self.gate.clear();
                self.minutes.set_share(None);
                self.sweep_at = None;
            }
        }
    }

    /// The day's allowance and the fetches started against it.
    pub fn gate(&self) -> &DayGate {
        &self.gate
    }

    /// The minute's fetches against the share of the per-minute cap.
    pub fn minutes(&self) -> &MinuteGate {
        &self.minutes
    }

    /// Whether `id`'s fetch queued at `due` for the time `planned` is one besides the
    /// plan's times: a catch-up, a fetch held from an earlier day, a first sight, or a plan
    /// fetch moved off its time (brought forward by the end-of-day sweep, or moved to half a
    /// gap after a first sight). The coordinator levelled the plan's times only.
    fn besides_plan(&self, id: &str, due: i64, planned: i64) -> bool {
        self.off_plan.contains(id)
            || self.held.contains(id)
            || self.expedited.contains_key(id)
            || due < planned
            || self
                .feeds
                .get(id)
                .is_none_or(|(times, _)| times.next_after(planned - 1) != Some(planned))
    }

    /// Whether a fetch besides the plan's may start at `now_ms` under the share of the
    /// per-minute cap: the minute's fetches, and the plan's still queued for the rest of
    /// it, leave room ([`MinuteGate::extra_room`]).
    fn extra_may_start(&mut self, now_ms: i64) -> bool {
        if let Some(end) = self.minutes.unreserved(now_ms) {
            // The entries due before the minute ends are the heap's top: taken off and put
            // back, a cost of the minute's entries, not the whole heap's (a full scan each
            // minute was 36 times the day's schedule work at 100,000 feeds). Stale ones are
            // dropped, as `pop_due` would.
            let mut due_now = Vec::new();
            let mut pending = 0u64;
            while self
                .heap
                .peek()
                .is_some_and(|Reverse((due, ..))| *due < end)
            {
                let Some(e) = self.heap.pop() else { break };
                let Reverse((due, g, planned, id)) = &e;
                if self.is_live(*g, id) {
                    pending += u64::from(!self.besides_plan(id, *due, *planned));
                    due_now.push(e);
                }
            }
            self.heap.extend(due_now);
            self.minutes.reserve(pending);
        }
        self.minutes.extra_room(now_ms)
    }

    /// Gives the allowance back a fetch handed out at `admitted_ms` that was not made
    /// ([`DayGate::release`]).
    pub fn release(&mut self, admitted_ms: i64) {
        self.gate.release(admitted_ms);
    }

    /// When the next fetch is due, or the end-of-day sweep (possibly a stale entry: waking
    /// early is harmless).
    pub fn next_due(&self) -> Option<i64> {
        let plan = self.heap.peek().map(|Reverse((due, ..))| *due);
        let extra = self.extras.peek().map(|Reverse((due, ..))| *due);
        let top = match (plan, extra) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (top, self.sweep_at.filter(|_| !self.feeds.is_empty())) {
            (Some(t), Some(s)) => Some(t.min(s)),
            (t, s) => t.or(s),
        }
    }

    /// When `host` may be fetched again (politeness).
    fn host_free(&self, host: &str) -> i64 {
        self.host_free_at.get(host).copied().unwrap_or(i64::MIN)
    }

    /// Hands out the extra fetches due at `now_ms` (`fill`): each once, on the day it is
    /// for or not at all (it is not owed: held, it would take a fetch of the next day's
    /// plan); a feed's queued plan time stays as it is.
    fn pop_extras(&mut self, now_ms: i64, out: &mut Vec<Due>) {
        while let Some(Reverse((due, deadline, id))) = self.extras.peek().cloned() {
            if due > now_ms {
                break;
            }
            self.extras.pop();
            let Some(host) = self.feeds.get(&id).map(|(times, _)| times.host.clone()) else {
                continue;
            };
            if now_ms >= deadline || self.gate.room(now_ms) == Some(0) {
                continue;
            }
            let free = self.host_free(&host);
            if free > now_ms {
                self.extras.push(Reverse((free, deadline, id)));
                continue;
            }
            if !self.extra_may_start(now_ms) {
                // A later minute of the same day, or not at all.
                let at = self.minutes.defer(&id, now_ms);
                if at < deadline {
                    self.extras.push(Reverse((at, deadline, id)));
                } else {
                    self.minutes.forget(&id);
                }
                continue;
            }
            // Room was checked: this counts the fetch.
            let _ = self.gate.admit(now_ms);
            self.minutes.started(now_ms, false, &id);
            self.host_free_at
                .insert(host, now_ms + self.min_host_gap_ms);
            self.last_out.insert(id.clone(), now_ms);
            self.first_seen.remove(&id);
            out.push(Due {
                feed_id: id,
                planned_ms: due,
                besides_plan: true,
            });
        }
    }

    /// Every fetch that may start at `now_ms`, in due order; queues each feed's next fetch.
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<Due> {
        if let Some(at) = self.sweep_at.filter(|&at| at <= now_ms) {
            // Once a day, in the day's last hour (a late wake-up sweeps the day it is in).
            if now_ms < day_end(at) {
                self.sweep(now_ms);
            }
            self.sweep_at = Some(next_sweep(now_ms));
        }
        let mut out = Vec::new();
        self.pop_extras(now_ms, &mut out);
        while let Some(Reverse((due, generation, planned, id))) = self.heap.peek().cloned() {
            if due > now_ms {
                break;
            }
            self.heap.pop();
            let free = match self.feeds.get(&id) {
                Some((times, current)) if *current == generation => self.host_free(&times.host),
                _ => continue,
            };
            if free > now_ms {
                // Host used too recently: retry when it is free, keeping the planned time.
                self.heap.push(Reverse((free, generation, planned, id)));
                continue;
            }
            let extra = self.besides_plan(&id, due, planned);
            if extra && !self.extra_may_start(now_ms) {
                // Besides the plan, in a minute without room: the feed's own second of the
                // next minute, to try again; or, when the feed's plan has a time before
                // then, that time instead, as a plan fetch. A feed has one queued fetch, so
                // an extra that waited past its plan's times kept them from starting, and
                // they all started at once behind it (on `real-commits` at four a day with
                // a cap of five, one feed four times in one second).
                let at = self.minutes.defer(&id, now_ms);
                let next = self
                    .feeds
                    .get(&id)
                    .and_then(|(times, _)| times.next_after(now_ms - 1))
                    .filter(|&n| n <= at);
                match next {
                    Some(n) => {
                        self.off_plan.remove(&id);
                        self.held.remove(&id);
                        self.expedited.remove(&id);
                        self.minutes.forget(&id);
                        self.heap.push(Reverse((n, generation, n, id)));
                    }
                    None => self.heap.push(Reverse((at, generation, planned, id))),
                }
                continue;
            }
            let Some((times, _)) = self.feeds.get(&id) else {
                continue;
            };
            if let Err(release_ms) = self.gate.admit(now_ms) {
                // Today's allowance is spent: the fetch waits for the next day, where it
                // stands as that day's first time, at its place in the day's paced start
                // (`DayGate::admit`; the slots between are not made up).
                self.held.insert(id.clone());
                self.heap
                    .push(Reverse((release_ms, generation, release_ms, id)));
                continue;
            }
            self.minutes.started(now_ms, !extra, &id);
            self.host_free_at
                .insert(times.host.clone(), now_ms + self.min_host_gap_ms);
            let first_sight = self.expedited.remove(&id).is_some();
            self.last_out.insert(id.clone(), now_ms);
            // The plan's times that passed while a fetch besides the plan waited for a
            // minute with room (queued again past its time) are served by it.
            let waited = extra && due > planned;
            let mut next = times.next_after(if waited { planned.max(now_ms) } else { planned });
            if first_sight {
                self.first_seen.insert(id.clone());
                // Paced besides the plan: its next time within half a gap moves to half a
                // gap after this fetch (`first_due`).
                if let Some(n) = next {
                    let gap = times.gap_to(n);
                    if n - now_ms < gap / 2 {
                        next = Some(now_ms + gap / 2);
                    }
                }
            } else {
                self.first_seen.remove(&id);
            }
            if self.held.remove(&id) && self.about_daily() {
                // A fetch held from an earlier day stands in for the feed's next plan time
                // on this day. Kept as well, it would owe this day one fetch more than its
                // plan, and the last fetch of the day would be held in turn: where every
                // feed is fetched about once a day the days have no slack, and a backlog
                // (day 1's, after the first sights) spilled over midnight every day (`news`
                // at one a day: 2,090 holds, live 1.126 × offline; with this 868, 1.078).
                // Above a fetch per feed a day the end-of-day sweep finds the slack, and
                // holds are rare and transient: skipping there left a day of `real-commits`
                // at two a day at 0.964 of its budget.
                if let Some(n) = next.filter(|&n| n < day_end(now_ms)) {
                    next = times.next_after(n);
                }
            }
            if self.off_plan.remove(&id) {
                // After a catch-up, the plan's next time within half its gap is skipped.
                if let Some(n) = next {
                    let gap = times.gap_to(n);
                    if n - now_ms < gap / 2 {
                        next = times.next_after(n);
                    }
                }
            }
            if let Some(next) = next {
                self.heap
                    .push(Reverse((next, generation, next, id.clone())));
            }
            out.push(Due {
                feed_id: id,
                planned_ms: planned,
                besides_plan: extra,
            });
        }
        out
    }
}

/// The end of the UTC day `t_ms` falls in.
fn day_end(t_ms: i64) -> i64 {
    (t_ms.div_euclid(DAY_MS) + 1) * DAY_MS
}

/// Whether a publisher's skipHours (bit h, UTC) or skipDays (bit 0 = Monday) rule out a
/// fetch at `at_ms`: the worker drops such fetches, and the coordinator's demand count
/// leaves them out the same way.
pub fn skipped(hours: u32, days: u32, at_ms: i64) -> bool {
    let hour = (at_ms.rem_euclid(DAY_MS) / 3_600_000) as u32;
    // 1970-01-01 was a Thursday (3 with Monday = 0).
    let weekday = ((at_ms.div_euclid(DAY_MS) + 3).rem_euclid(7)) as u32;
    hours & (1 << hour) != 0 || days & (1 << weekday) != 0
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
