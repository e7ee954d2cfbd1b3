//! The daily fetch allowance: the most fetches one worker may start on a UTC day.
//!
//! The coordinator steers its plan toward the day's budget, but a plan is only a forecast
//! of what the workers will fetch: a replan that makes the plan denser finds feeds overdue
//! and catches them up, phases of multi-day periods fall unevenly on days, first sights
//! arrive in bulk. The allowance is the hard part of the budget: with every assignment the
//! coordinator tells each worker how many fetches it may start on the current UTC day, its
//! fetches already counted included, and how many on each later day until it says again.
//! The coordinator deals the day's budget among the workers so that the allowances add up
//! to it; a worker that has used its allowance holds every further fetch until the next
//! UTC day begins. Counting is the worker's own (the coordinator's count lags by the
//! reports in flight), raised to what the coordinator counted for the worker's name, so a
//! restarted worker does not spend its day twice.
//!
//! The fetches held to the next day start there in the order they were held, paced at
//! [`HELD_PACE`] times the next day's mean rate, not all at its first millisecond: on
//! `real-commits` at half a fetch a day, 29 of the median day's 461 fetches started at
//! 00:00:00 (about 13 of them held the day before, the rest a replan's catch-ups), 90 times
//! the mean minute and the day's largest pile by far; every worker of a fleet held its share
//! to the same instant, and hosts saw them together. Paced, the held share of a day (4.5%
//! there) starts within that share of the day divided by the pace (about 8 minutes), a few
//! minutes' wait for fetches already held for hours.

/// Milliseconds in a UTC day.
pub const DAY_MS: i64 = 86_400_000;

/// How many times the next day's mean rate (its allowance over the day) the fetches held
/// to it start at: the `k`-th held starts `k / (HELD_PACE × allowance)` of a day after
/// midnight (see the module's comment).
pub const HELD_PACE: i64 = 8;

/// What the coordinator allows one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Allowance {
    /// The UTC day it is for (days since the Unix epoch).
    pub day: i64,
    /// The most fetches the worker may start on `day`, those already started included.
    pub fetches: u64,
    /// The most fetches on each later day, until a new allowance arrives.
    pub later_days: u64,
    /// Fetches the coordinator has counted for this worker's name on `day`.
    pub counted: u64,
    /// The worker's share of the cluster's per-minute cap: the most fetches a minute, the
    /// plan's and those besides it together ([`crate::minute_gate`]); `None`: no cap.
    pub per_minute: Option<u64>,
}

/// A worker's count of the fetches it started today, against its allowance.
#[derive(Debug, Default)]
pub struct DayGate {
    allowance: Option<Allowance>,
    day: i64,
    started: u64,
    held: u64,
    /// Fetches held to the day after `day` so far: the next one's place in its start.
    held_to_next: u64,
}

impl DayGate {
    /// Takes a new allowance from the coordinator (`now_ms`: the worker's clock).
    pub fn set(&mut self, a: Allowance, now_ms: i64) {
        self.roll(now_ms);
        if a.day == self.day {
            self.started = self.started.max(a.counted);
        }
        self.allowance = Some(a);
    }

    /// Forgets the allowance: every fetch goes (a coordinator that sends none).
    pub fn clear(&mut self) {
        self.allowance = None;
    }

    /// The allowance in force, if any.
    pub fn allowance(&self) -> Option<Allowance> {
        self.allowance
    }

    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if day != self.day {
            self.day = day;
            self.started = 0;
            self.held_to_next = 0;
        }
    }

    /// The most fetches today, or `None` without an allowance.
    fn limit(&self) -> Option<u64> {
        self.limit_on(self.day)
    }

    /// The most fetches on `day` (today or later), or `None` without an allowance.
    fn limit_on(&self, day: i64) -> Option<u64> {
        let a = self.allowance?;
        Some(if day == a.day {
            a.fetches
        } else {
            a.later_days
        })
    }

    /// Whether a fetch may start at `now_ms`: counts it and answers `Ok`, or answers when
    /// on the next UTC day it may: that day's start, plus its place among the fetches held
    /// to it, paced at [`HELD_PACE`] times that day's mean rate.
    pub fn admit(&mut self, now_ms: i64) -> Result<(), i64> {
        self.roll(now_ms);
        match self.limit() {
            Some(limit) if self.started >= limit => {
                self.held += 1;
                let place = self.held_to_next;
                self.held_to_next += 1;
                Err((self.day + 1) * DAY_MS + self.held_offset(place))
            }
            _ => {
                self.started += 1;
                Ok(())
            }
        }
    }

    /// How long after the next day's start the fetch held in place `place` (from 0) starts:
    /// `place` spacings of a day over [`HELD_PACE`] times the next day's allowance, at most
    /// `1 / HELD_PACE` of the day (more held than the next day allows start together at
    /// its end, and are likely held again). Zero where the next day allows nothing.
    fn held_offset(&self, place: u64) -> i64 {
        let next = match self.limit_on(self.day + 1) {
            None | Some(0) => return 0,
            Some(n) => n,
        };
        let next = i64::try_from(next).unwrap_or(i64::MAX).min(DAY_MS);
        let place = i64::try_from(place).unwrap_or(i64::MAX).min(next);
        DAY_MS / (HELD_PACE * next) * place
    }

    /// Gives back a fetch admitted at `admitted_ms` that was not made after all (its feed
    /// revoked, or held back by the server's Retry-After, before it started): the coordinator
    /// never hears of it, so kept in the count it would hold a fetch of the day's budget that
    /// nothing spends. On the wall-clock farm, feeds moved between the two workers as they
    /// joined left day 0 at 2,293 of its 2,400 fetches. A fetch of an earlier day is not
    /// given back.
    pub fn release(&mut self, admitted_ms: i64) {
        if admitted_ms.div_euclid(DAY_MS) == self.day {
            self.started = self.started.saturating_sub(1);
        }
    }

    /// Fetches the allowance still lets start on the day of `now_ms`, or `None` without an
    /// allowance.
    pub fn room(&mut self, now_ms: i64) -> Option<u64> {
        self.roll(now_ms);
        Some(self.limit()?.saturating_sub(self.started))
    }

    /// Fetches started on the current day.
    pub fn started_today(&self) -> u64 {
        self.started
    }

    /// Fetches held to a later day since the start (one fetch held twice counts twice).
    pub fn held_total(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetch_not_made_gives_its_place_back_on_its_own_day_only() {
        let mut g = DayGate::default();
        let day = 4;
        let t = day * DAY_MS + 1000;
        let a = Allowance {
            day,
            fetches: 2,
            later_days: 2,
            counted: 0,
            per_minute: None,
        };
        g.set(a, t);
        assert_eq!(g.admit(t), Ok(()));
        assert_eq!(g.admit(t + 1), Ok(()));
        assert_eq!(g.admit(t + 2), Err((day + 1) * DAY_MS));
        g.release(t + 1);
        assert_eq!(g.started_today(), 1);
        assert_eq!(g.admit(t + 3), Ok(()));
        // Admitted yesterday, given back today: today's count stays.
        let next = (day + 1) * DAY_MS + 5;
        assert_eq!(g.admit(next), Ok(()));
        g.release(t + 3);
        assert_eq!(g.started_today(), 1);
        // Nothing below zero.
        let mut empty = DayGate::default();
        empty.release(0);
        assert_eq!(empty.started_today(), 0);
    }

    #[test]
    fn without_an_allowance_every_fetch_goes() {
        let mut g = DayGate::default();
        for i in 0..1000 {
            assert_eq!(g.admit(i), Ok(()));
        }
        assert_eq!(g.started_today(), 1000);
    }

    #[test]
    fn the_allowance_holds_the_rest_of_the_day_then_later_days_use_their_own() {
        let mut g = DayGate::default();
        let day = 3;
        let t = day * DAY_MS + 1000;
        g.set(
            Allowance {
                day,
                fetches: 5,
                later_days: 2,
                counted: 0,
                per_minute: None,
            },
            t,
        );
        for i in 0..5 {
            assert_eq!(g.admit(t + i), Ok(()));
        }
        // The held start the next day in the order they were held, at eight times its
        // mean rate (its allowance, `later_days`, is 2: one every 1.5 hours).
        let spacing = DAY_MS / (HELD_PACE * 2);
        assert_eq!(spacing, 5_400_000);
        assert_eq!(g.admit(t + 10), Err((day + 1) * DAY_MS));
        assert_eq!(g.admit(t + 11), Err((day + 1) * DAY_MS + spacing));
        // More held than the next day allows start together at the end of the window.
        assert_eq!(g.admit(t + 12), Err((day + 1) * DAY_MS + 2 * spacing));
        assert_eq!(g.admit(t + 13), Err((day + 1) * DAY_MS + 2 * spacing));
        assert_eq!(g.held_total(), 4);
        // The next day runs on `later_days` until the coordinator speaks again, and its own
        // held count starts from the first place.
        let next = (day + 1) * DAY_MS;
        assert_eq!(g.admit(next), Ok(()));
        assert_eq!(g.admit(next + 1), Ok(()));
        assert_eq!(g.admit(next + 2), Err((day + 2) * DAY_MS));
        assert_eq!(g.admit(next + 3), Err((day + 2) * DAY_MS + spacing));
        // A next day that allows nothing: no pacing to do.
        let mut g = DayGate::default();
        g.set(
            Allowance {
                day,
                fetches: 0,
                later_days: 0,
                counted: 0,
                per_minute: None,
            },
            t,
        );
        assert_eq!(g.admit(t), Err((day + 1) * DAY_MS));
        assert_eq!(g.admit(t + 1), Err((day + 1) * DAY_MS));
    }

    #[test]
    fn what_the_coordinator_counted_raises_a_restarted_workers_count() {
        let mut g = DayGate::default();
        let t = 10 * DAY_MS + 5;
        let a = Allowance {
            day: 10,
            fetches: 4,
            later_days: 4,
            counted: 3,
            per_minute: None,
        };
        g.set(a, t);
        assert_eq!(g.started_today(), 3);
        assert_eq!(g.admit(t), Ok(()));
        assert!(g.admit(t).is_err());
        // A lower count (reports still in flight) never lowers the worker's own.
        g.set(Allowance { counted: 1, ..a }, t);
        assert_eq!(g.started_today(), 4);
        // An allowance for a day already gone is that day's; today's limit is `later_days`.
        let mut g = DayGate::default();
        g.set(
            Allowance {
                day: 9,
                fetches: 0,
                later_days: 1,
                counted: 7,
                per_minute: None,
            },
            t,
        );
        assert_eq!(g.started_today(), 0);
        assert_eq!(g.admit(t), Ok(()));
        assert!(g.admit(t).is_err());
        g.clear();
        assert_eq!(g.admit(t), Ok(()));
    }
}
