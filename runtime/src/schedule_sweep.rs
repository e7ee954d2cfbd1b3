//! The end-of-day sweep of [`super::Schedule`]: an hour before a UTC day ends, the room
//! the day's allowance has left goes to the fetches due in the next day's first hours, and
//! what they cannot take to fetches besides the plan, half-way through feeds' gaps.

use super::{catch_up_at, day_end, Schedule};
use crate::allowance::DAY_MS;
use std::cmp::Reverse;
use std::collections::HashSet;

/// How long before a UTC day ends the schedule looks for room left in the day's allowance,
/// and the most it moves a fetch forward to use it. A plan's times move a little at every
/// replan, and a daily fetch at 23:50 that moves to 00:05 skips a calendar day (its gaps
/// stay whole: the fetches are a day and a quarter hour apart). When hundreds of feeds
/// share such a time, one day falls short of its budget and the next holds what it cannot
/// start under its allowance: on `real-commits` at four fetches a day, day 19 spent 0.938 of
/// its budget this way. So the fetches due early on the next day are moved into this one,
/// the earliest first and as many as the room the day has left beyond the fetches still due
/// in it, each by at most an eighth of its feed's gap ([`SWEEP_GAP_SHARE`]) and an hour.
pub const SWEEP_MS: i64 = 3_600_000;

/// The most a fetch moves forward at the end of a day, as a share of its plan's gap: one
/// eighth (an hour for a daily feed).
pub const SWEEP_GAP_SHARE: i64 = 8;

/// When the room is more than the fetches an eighth of their gap brings into the day, the
/// next ones come by up to a quarter of their gap and two hours. A round that re-plans a
/// few hundred feeds can leave a day short by more than the next day's first three
/// quarters of an hour hold: on `real-commits` at four fetches a day, day 23 lost 114
/// fetches over two such rounds and spent 0.969 of its budget with the eighth alone.
pub const SWEEP_WIDE_GAP_SHARE: i64 = 4;

/// When the room is more still and the day's allowance is at most a fetch per feed,
/// fetches due later on the next day come by an eighth of their gap and at most this, then
/// by a quarter and at most twice this: feeds fetched every few days, whose eighth alone is
/// hours. Where most feeds are fetched less than daily, a round that changes many plans at
/// once (the rates' calibration is fitted anew at midnight) moves tens of a day's fetches
/// to later days, and the next day's first two hours hold a twelfth of a day's fetches: on
/// the synthetic `drift` population at half a fetch a day (250 a day), one day's sweep
/// found 16 of the 40 it had room for, and three days spent 0.904 to 0.944 of the budget;
/// reaching six hours, 0.948 to 0.964; reaching twelve, every day its whole budget. Above
/// a fetch per feed a day the first two reaches fill the days, and the longer ones only
/// reorder fetches (delay within ±1% at four a day).
pub const SWEEP_FAR_MS: i64 = 6 * SWEEP_MS;

impl Schedule {
    /// Moves fetches due early on the next day into this one, as many as the day's
    /// allowance has room for beyond the fetches still due today ([`SWEEP_MS`],
    /// [`SWEEP_WIDE_GAP_SHARE`], [`SWEEP_FAR_MS`]).
    pub(super) fn sweep(&mut self, now_ms: i64) {
        let day_end = day_end(now_ms);
        let Some(spare) = self.spare_today(now_ms) else {
            return;
        };
        if spare == 0 {
            tracing::debug!(now_ms, spare, "end-of-day sweep");
            return;
        }
        // (reach, due, shift, planned, feed, gap) of the fetches that can land today: those an
        // eighth of their gap and an hour bring first, then a quarter and two hours, then
        // (at most a fetch per feed a day) an eighth and six hours, then a quarter and
        // twelve.
        let (reaches, horizon) = if self.about_daily() {
            (4, 2 * SWEEP_FAR_MS)
        } else {
            (2, 2 * SWEEP_MS)
        };
        let mut early: Vec<(u8, i64, i64, i64, String, i64)> = self
            .heap
            .iter()
            .filter(|Reverse((due, g, _, id))| {
                (day_end..day_end + horizon).contains(due) && self.is_live(*g, id)
            })
            .filter_map(|Reverse((due, _, planned, id))| {
                let (times, _) = self.feeds.get(id)?;
                if times.timed {
                    return None;
                }
                let gap = times.gap_to(*planned);
                let shifts = [
                    (gap / SWEEP_GAP_SHARE).min(SWEEP_MS),
                    (gap / SWEEP_WIDE_GAP_SHARE).min(2 * SWEEP_MS),
                    (gap / SWEEP_GAP_SHARE).min(SWEEP_FAR_MS),
                    (gap / SWEEP_WIDE_GAP_SHARE).min(2 * SWEEP_FAR_MS),
                ];
                let reach = shifts[..reaches].iter().position(|&s| *due - s < day_end)?;
                Some((reach as u8, *due, shifts[reach], *planned, id.clone(), gap))
            })
            .collect();
        early.sort_unstable();
        let found = early.len();
        early.truncate(spare as usize);
        let moved: HashSet<String> = early.iter().map(|e| e.4.clone()).collect();
        let extras = self.fill(now_ms, spare - moved.len() as u64, &moved);
        // What a short day is read from: its room, and how the sweep used it.
        tracing::debug!(
            now_ms,
            spare,
            found,
            moved = moved.len(),
            extras,
            "end-of-day sweep"
        );
        for (_, due, shift, planned, id, gap) in early {
            // A new generation makes the queued entry stale; the plan's time stays the
            // fetch's, so its next time follows as if it had come on time.
            self.generation += 1;
            if let Some(entry) = self.feeds.get_mut(&id) {
                entry.1 = self.generation;
            }
            // One the reach brings before now starts at its own phase after the sweep, not
            // with the others at its instant.
            let at = if due - shift < now_ms {
                sweep_phase(&id, gap, now_ms)
            } else {
                due - shift
            };
            if let Some(e) = self.expedited.get_mut(&id) {
                *e = at;
            }
            self.heap.push(Reverse((at, self.generation, planned, id)));
        }
    }

    /// Gives `n` fetches of the day's room to feeds besides their plan's times, none of
    /// them in `moved`; answers how many it found.
    ///
    /// Moving the next day's first fetches into the day borrows them: the next day then
    /// starts that many short of its plan, and its own sweep borrows them back from the day
    /// after, with what the day itself lost to replans (a time moved within half a gap of a
    /// fetch just made is skipped). Nothing repays the loan, so it grows until the next
    /// day's first hours cannot hold it: on `real-commits` at two fetches a day the room at
    /// 23:00 grew from 13 on day 17 to 205 on day 23, the reaches found 162, and the day
    /// spent 0.977 of its budget. What the moves leave is given as fetches besides the
    /// plan, which leave the next day's plan whole. (Filling the whole room this way ends
    /// the loan too, but moved the delay by +3.7% to -1.3% over ten runs, with
    /// `startstop` at half a fetch a day worst: the moves stay first.)
    ///
    /// An extra fetch is worth the postings waiting since the feed's last fetch times how
    /// much sooner they come than at its next time, `since · ahead · rate`, with the rate
    /// read off the plan's spacing (the delay-optimal spacing goes as one over the square
    /// root of the rate): `since · ahead / gap²`, largest half-way through a gap. Feeds
    /// whose next time is within half a gap come last: the next re-assignment would skip
    /// that time after the extra fetch (`first_due`), which is a move again.
    fn fill(&mut self, now_ms: i64, n: u64, moved: &HashSet<String>) -> usize {
        if n == 0 {
            return 0;
        }
        let day_end = day_end(now_ms);
        // (whether the next time is within half a gap, -value, feed, its gap), best first.
        let mut found: Vec<(bool, f64, String, i64)> = self
            .heap
            .iter()
            .filter(|Reverse((due, g, _, id))| *due >= day_end && self.is_live(*g, id))
            .filter_map(|Reverse((due, _, planned, id))| {
                if moved.contains(id) || self.expedited.contains_key(id) || self.held.contains(id) {
                    return None;
                }
                let last = *self.last_out.get(id)?;
                let gap = self.feeds.get(id)?.0.gap_to(*planned);
                if gap <= 0 {
                    return None;
                }
                let (since, ahead) = ((now_ms - last).max(0) as f64, (due - now_ms) as f64);
                let value = since * ahead / (gap as f64 * gap as f64);
                Some((2.0 * ahead < gap as f64, -value, id.clone(), gap))
            })
            .collect();
        found.sort_by(|a, b| {
            (a.0.cmp(&b.0))
                .then(a.1.total_cmp(&b.1))
                .then_with(|| a.2.cmp(&b.2))
        });
        found.truncate(n as usize);
        for (_, _, id, gap) in &found {
            // Each at its own phase after the sweep, as a replan's catch-ups are.
            let at = sweep_phase(id, *gap, now_ms);
            self.extras.push(Reverse((at, day_end, id.clone())));
        }
        found.len()
    }
}

/// When a fetch the sweep at `now_ms` brings into the day starts: at its feed's phase
/// ([`catch_up_at`]), and still that day (a sweep that runs late, its worker's loop held
/// up, has less than the window left before midnight).
fn sweep_phase(feed_id: &str, gap_ms: i64, now_ms: i64) -> i64 {
    catch_up_at(feed_id, gap_ms, now_ms).min(day_end(now_ms) - 1)
}

/// The first end-of-day sweep time after `now_ms`: an hour before a UTC day ends.
pub(super) fn next_sweep(now_ms: i64) -> i64 {
    let at = day_end(now_ms) - SWEEP_MS;
    if at > now_ms {
        at
    } else {
        at + DAY_MS
    }
}
