//! The budget of each UTC day, first-sight fetches included.
//!
//! A feed nobody has fetched yet is fetched once at sight, off the plan: its document
//! tells the learner its recent past. Taken all at once, the first sights of a new
//! population spend more than a day's budget (922 feeds at half a fetch a day spent 2.08
//! times day 0's budget). So each round paces them: the day's budget, less what was
//! fetched since midnight, less the first sights already given today, less what the plan's
//! minimums need for the rest of the day, is what new first sights may take today; they
//! are due at once (the sooner a feed is seen, the sooner it is learned). Those left over
//! are due at the start of the next days, a day's budget less the minimums at a time. On a
//! day that holds first sights the plan gets the share of the budget left for the rest of
//! the day; on other days the whole of it. (Steering every day's plan by what it had spent
//! since midnight made it spend less than its budget: on `real-commits` at one fetch a day,
//! days 14–55 spent 0.992 of it and realized 374.6 min against 365.3, the share moving at
//! each replan and never above 1.) Beyond the day, what the run spent ahead of the budget
//! earned since its first fetch (catch-ups of feeds a denser plan finds overdue) is paid
//! back over the next [`PAYBACK_DAYS`] days.
//!
//! Since the workers hold each day's budget (`hub::allowances`), the round reserves nothing
//! for the minimums (`min_share` 0): first sights take the whole day's room.
//!
//! The share spreads what the day has left evenly over its hours, and a plan's fetches do
//! not fall evenly: the round counts what its plan places before midnight
//! ([`planned_between`]) and plans again at the share that fills the day ([`refill_share`]).
//!
//! Pure: the round calls it with the ledger and the pending feeds, and hands the times
//! to the workers in each feed's assignment (`first_fetch_unix_ms`).

use super::figures::Ledger;
use crate::control::relearn::MAX_BUDGET_SHARE;
use crate::control::FeedSpec;
use crate::time::DAY_MS;
use std::collections::HashMap;

/// What steers the plan from one round to the next.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Steering {
    /// The latest UTC day (days since the Unix epoch) that holds first sights: the plan is
    /// steered by the day's spending until that day ends.
    pub last_day: Option<i64>,
}

/// What a round decides for the day.
#[derive(Clone, Debug, PartialEq)]
pub struct Pacing {
    /// What steers the next round.
    pub paced_day: Steering,
    /// Share of the daily budget the plan may spend for the rest of the day (0 to
    /// [`MAX_BUDGET_SHARE`]; the replanner keeps it at or above what the minimums need).
    pub share: f64,
    /// When each pending feed's first fetch is due, Unix ms.
    pub first_sights: HashMap<String, i64>,
    /// On a day the share steers (one that holds first sights, the payback not binding): the
    /// fetches the day has left for the plan and the instant the day ends. The share spreads
    /// them evenly over the hours left, and a plan's fetches are not spread evenly, so the
    /// round checks that its plan places them ([`refill_share`]).
    pub rest_of_day: Option<(f64, i64)>,
}

/// Paces the first sights of `pending` (feeds never fetched, in the order they should be
/// seen) at `now_ms`, with `per_day` fetches a day of which `min_share` is what the plan's
/// minimums need; `ledger` counts the fetches made (first sights included);
/// `given` holds the times earlier rounds gave (kept while still ahead or today: a worker
/// may hold them already); `steering` is the last round's [`Pacing::paced_day`].
pub fn pace(
    now_ms: i64,
    per_day: f64,
    min_share: f64,
    ledger: &Ledger,
    pending: &[&str],
    given: &HashMap<String, i64>,
    steering: Steering,
) -> Pacing {
    let mut first_sights = HashMap::with_capacity(pending.len());
    if !(per_day.is_finite() && per_day > 0.0) {
        // Nothing to pace against: every first sight at once, the plan unchanged.
        first_sights.extend(pending.iter().map(|id| (id.to_string(), now_ms)));
        return Pacing {
            paced_day: steering,
            share: 1.0,
            first_sights,
            rest_of_day: None,
        };
    }
    let min_share = min_share.clamp(0.0, 1.0);
    let today_fetches = ledger.today(now_ms);
    let today = now_ms.div_euclid(DAY_MS);
    let day_end = (today + 1) * DAY_MS;
    let left = (day_end - now_ms) as f64 / DAY_MS as f64;
    // First sights already given, per day from today (earlier days' count as today's: they
    // are still to be made).
    let mut per_day_given: Vec<f64> = Vec::new();
    let mut fresh = Vec::new();
    for &id in pending {
        match given.get(id) {
            Some(&t) => {
                let d = (t.div_euclid(DAY_MS) - today).max(0) as usize;
                if per_day_given.len() <= d {
                    per_day_given.resize(d + 1, 0.0);
                }
                per_day_given[d] += 1.0;
                first_sights.insert(id.to_string(), t);
            }
            None => fresh.push(id),
        }
    }
    let given_on = |v: &Vec<f64>, d: usize| v.get(d).copied().unwrap_or(0.0);
    // Today: what is left of the budget after the fetches made, the first sights given and
    // the minimums for the rest of the day.
    let mut room =
        per_day - today_fetches as f64 - given_on(&per_day_given, 0) - min_share * per_day * left;
    let mut day = 0usize;
    let mut due = now_ms;
    for id in fresh {
        while room < 1.0 {
            // The next day: its budget less the minimums and the first sights it holds.
            day += 1;
            due = (today + day as i64) * DAY_MS;
            room = per_day * (1.0 - min_share) - given_on(&per_day_given, day);
            if per_day * (1.0 - min_share) < 1.0 {
                // The minimums take the whole budget: one first sight a day still goes.
                room = 1.0;
            }
        }
        room -= 1.0;
        if per_day_given.len() <= day {
            per_day_given.resize(day + 1, 0.0);
        }
        per_day_given[day] += 1.0;
        first_sights.insert(id.to_string(), due);
    }
    let latest = (per_day_given.iter().rposition(|&n| n > 0.0)).map(|d| today + d as i64);
    let last_day = latest.max(steering.last_day);
    // The plan: what today's budget has left, spread over the rest of the day, on a day
    // that holds first sights.
    let spare = per_day - today_fetches as f64 - given_on(&per_day_given, 0);
    // The share may rise within the day: a plan's fetches are not spread evenly over it (on
    // a cold start the feeds' models are alike and their fetches fall in the same hours),
    // so what the day has left is re-dealt at each round. The workers' allowances keep the
    // day within its budget. (Holding the share at the day's lowest left day 0 at two
    // fetches a day on `real-commits` at 0.81 of its budget; re-dealt, 0.97.) It may pass
    // 1: a plan whose fetches crowd into some hours leaves the day behind an even pace
    // however the earlier rounds dealt it (`bursts` at four a day, its fetches mostly in
    // the morning: held at 1, day 0 spent 0.956 of its budget; up to 1.5, the whole of it).
    // The payback below only ever lowers it.
    let steered = left > 0.0 && last_day.is_some_and(|d| d >= today);
    let share = if steered {
        (spare / (per_day * left)).clamp(0.0, MAX_BUDGET_SHARE)
    } else {
        1.0
    };
    let back = payback(now_ms, ledger, per_day);
    let rest_of_day =
        (steered && back.is_none_or(|b| b >= share)).then_some((spare.max(0.0), day_end));
    let share = back.map_or(share, |back| share.min(back));
    Pacing {
        paced_day: Steering { last_day },
        share,
        first_sights,
        rest_of_day,
    }
}

/// Fetches the plan's `specs` place in `[from_ms, to_ms)`.
pub fn planned_between<'a>(
    specs: impl IntoIterator<Item = &'a FeedSpec>,
    from_ms: i64,
    to_ms: i64,
) -> f64 {
    let mut n = 0.0;
    for spec in specs {
        let period = spec.period_seconds * 1000.0;
        if !(period.is_finite() && period >= 1.0) {
            continue;
        }
        for &offset in &spec.offsets_seconds {
            let first = (spec.origin_unix_ms as f64 + offset * 1000.0).rem_euclid(period);
            // The times `first + k · period` in the window: k from the first at or after
            // `from_ms` up to the last before `to_ms`.
            let count = ((to_ms as f64 - first) / period).ceil()
                - ((from_ms as f64 - first) / period).ceil();
            if count.is_finite() {
                n += count.max(0.0);
            }
        }
    }
    n
}

/// The share that makes a plan of `share` fill the `room` fetches its day has left, where it
/// placed only `planned` of them there; `None` where it fills them within 2% (or a fetch), or
/// the share cannot rise. Fetches scale with the share, so the shortfall's ratio is the
/// correction. On `steady` at four a day the last round of day 0 had 75 fetches left for two
/// hours, a share of 0.45, and its plan placed 35 there: the day spent 0.98 of its budget.
pub fn refill_share(share: f64, room: f64, planned: f64) -> Option<f64> {
    if !(room > 0.0 && share > 0.0) || planned >= 0.98 * room || room - planned < 1.0 {
        return None;
    }
    let next = if planned > 0.0 {
        share * room / planned
    } else {
        MAX_BUDGET_SHARE
    };
    let next = next.min(MAX_BUDGET_SHARE);
    (next > share).then_some(next)
}

/// The share of the budget that pays back, over [`PAYBACK_DAYS`], what the run spent ahead
/// of the budget earned since its first fetch; `None` when it is not ahead (only a day with
/// first sights makes up for fetches not made, through its share).
fn payback(now_ms: i64, ledger: &Ledger, per_day: f64) -> Option<f64> {
    let since = ledger.since_ms.unwrap_or(now_ms).min(now_ms);
    let earned = per_day * (now_ms - since) as f64 / DAY_MS as f64;
    let ahead = ledger.fetches as f64 - earned;
    (ahead > 0.0).then(|| (1.0 - ahead / (PAYBACK_DAYS * per_day)).clamp(0.0, 1.0))
}

/// Days over which fetches made ahead of the budget are paid back. A single day made the
/// plan swing: a sparse plan followed by a dense one finds many feeds a whole gap overdue,
/// and their catch-ups overspend again (on `real-commits` at one fetch a day, day 1 spent
/// 127% of its budget after day 0's first-sight fetches were paid back in one day).
pub const PAYBACK_DAYS: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("f{i}")).collect()
    }

    /// A ledger of `n` fetches, the first at `since`, all today (day 0).
    fn spent(since: i64, n: u64) -> Ledger {
        Ledger {
            since_ms: Some(since),
            fetches: n,
            day: 0,
            day_fetches: n,
        }
    }

    /// A round with no first sight given before and nothing steering it.
    fn fresh(
        now_ms: i64,
        per_day: f64,
        min_share: f64,
        ledger: &Ledger,
        pending: &[&str],
    ) -> Pacing {
        pace(
            now_ms,
            per_day,
            min_share,
            ledger,
            pending,
            &HashMap::new(),
            Steering::default(),
        )
    }

    fn per_day_count(p: &Pacing) -> HashMap<i64, usize> {
        let mut out = HashMap::new();
        for t in p.first_sights.values() {
            *out.entry(t.div_euclid(DAY_MS)).or_insert(0) += 1;
        }
        out
    }

    #[test]
    fn a_new_population_is_seen_within_each_days_budget() {
        // 922 feeds at half a fetch a day (461 a day); the minimums need 2/7 of it.
        let names = ids(922);
        let pending: Vec<&str> = names.iter().map(String::as_str).collect();
        let p = fresh(0, 461.0, 2.0 / 7.0, &spent(0, 0), &pending);
        let days = per_day_count(&p);
        // 461 × 5/7 = 329.3: 329 today (at once), 329 tomorrow, 264 the day after.
        assert_eq!(days[&0], 329);
        assert_eq!(days[&1], 329);
        assert_eq!(days[&2], 264);
        assert!(p.first_sights.values().all(|&t| t % DAY_MS == 0));
        // Today's plan keeps what the first sights left: the minimums' share.
        assert!(
            (p.share - (461.0 - 329.0) / 461.0).abs() < 1e-9,
            "{}",
            p.share
        );
        // At four a day every feed is seen at once and the plan gets the rest.
        let p = fresh(0, 3688.0, 0.143 / 4.0, &spent(0, 0), &pending);
        assert_eq!(per_day_count(&p)[&0], 922);
        assert!((p.share - 0.75).abs() < 1e-9);
    }

    #[test]
    fn later_rounds_keep_the_times_given_and_count_them() {
        let names = ids(922);
        let pending: Vec<&str> = names.iter().map(String::as_str).collect();
        let first = fresh(0, 461.0, 2.0 / 7.0, &spent(0, 0), &pending);
        // Two hours later 300 of today's were made; the rest are still pending.
        let seen: std::collections::HashSet<&str> = first
            .first_sights
            .iter()
            .filter(|(_, &t)| t == 0)
            .map(|(id, _)| id.as_str())
            .take(300)
            .collect();
        let still: Vec<&str> = pending
            .iter()
            .copied()
            .filter(|id| !seen.contains(id))
            .collect();
        let now = 2 * 3_600_000;
        let second = pace(
            now,
            461.0,
            2.0 / 7.0,
            &spent(0, 300),
            &still,
            &first.first_sights,
            first.paced_day,
        );
        for id in &still {
            assert_eq!(second.first_sights[*id], first.first_sights[*id]);
        }
        // 300 made + 29 due today: 132 of 461 left for the 22 hours left, a share of
        // 0.312 where the day's start allowed 0.286: what is left is re-dealt.
        assert!((first.share - 132.0 / 461.0).abs() < 1e-9);
        let want = (461.0 - 329.0) / (461.0 * 22.0 / 24.0);
        assert!((second.share - want).abs() < 1e-9, "{}", second.share);
        // The next day starts from its own budget, less its first sights and the 29 of
        // yesterday's still to be made.
        let tomorrow = pace(
            DAY_MS,
            461.0,
            2.0 / 7.0,
            &Ledger {
                since_ms: Some(0),
                fetches: 461,
                day: 0,
                day_fetches: 461,
            },
            &still,
            &first.first_sights,
            second.paced_day,
        );
        assert!(
            (tomorrow.share - (461.0 - 329.0 - 29.0) / 461.0).abs() < 1e-9,
            "{}",
            tomorrow.share
        );
    }

    #[test]
    fn a_day_already_spent_leaves_the_plan_nothing_and_new_feeds_wait() {
        let names = ids(10);
        let pending: Vec<&str> = names.iter().map(String::as_str).collect();
        // Noon, 100 a day, 95 spent: room for none today beyond the minimums.
        let noon = 12 * 3_600_000;
        let p = fresh(noon, 100.0, 0.1, &spent(noon, 95), &pending);
        assert_eq!(per_day_count(&p)[&1], 10);
        assert!((p.share - 5.0 / 50.0).abs() < 1e-9);
        // Over budget: the plan share is 0 (the replanner raises it to the minimums).
        let p = pace(
            noon,
            100.0,
            0.1,
            &spent(noon, 130),
            &[],
            &HashMap::new(),
            Steering { last_day: Some(0) },
        );
        assert_eq!(p.share, 0.0);
        // Nothing pending, nothing spent: the whole budget.
        assert_eq!(fresh(0, 100.0, 0.1, &Ledger::default(), &[]).share, 1.0);
        // A day with no first sight is not steered, whatever it spent by noon.
        assert_eq!(
            pace(
                noon,
                100.0,
                0.1,
                &spent(-DAY_MS, 140),
                &[],
                &HashMap::new(),
                Steering { last_day: Some(-1) }
            )
            .share,
            1.0
        );
        // The day that held them still is, after the last one was made.
        let p = pace(
            noon,
            100.0,
            0.1,
            &spent(noon - 1, 90),
            &[],
            &HashMap::new(),
            Steering { last_day: Some(0) },
        );
        assert!((p.share - 0.2).abs() < 1e-9);
        // A budget of nothing paces nothing.
        let p = fresh(noon, f64::NAN, 0.1, &Ledger::default(), &pending);
        assert_eq!(p.share, 1.0);
        assert!(p.first_sights.values().all(|&t| t == noon));
        // A run 150 fetches ahead of the 100 a day it earned pays them back over three days:
        // half the budget, on any day.
        let ahead = Ledger {
            since_ms: Some(0),
            fetches: 250,
            day: 0,
            day_fetches: 100,
        };
        let p = fresh(DAY_MS, 100.0, 0.1, &ahead, &[]);
        assert!((p.share - 0.5).abs() < 1e-9, "{}", p.share);
        // Minimums that take the whole budget still let one first sight a day through.
        let p = fresh(0, 10.0, 1.0, &Ledger::default(), &pending);
        assert_eq!(per_day_count(&p).values().max(), Some(&1));
    }

    #[test]
    fn a_first_sight_day_behind_its_pace_may_plan_above_the_budget_for_its_rest() {
        // 20:00 of a day with first sights, 1,000 a day, 700 spent since midnight: 300
        // left for the last sixth of the day, 1.8 times the even pace, held at the largest
        // share. Not ahead of the budget earned (833), so nothing is paid back.
        let at = |h: i64, spent_today: u64| paced_at(h, spent_today, 0).share;
        assert_eq!(at(20, 700), MAX_BUDGET_SHARE);
        // 780 spent: 220 left, 1.32 times the pace.
        assert!((at(20, 780) - 1.32).abs() < 1e-9, "{}", at(20, 780));
        // On pace or ahead, at most the budget's pace, less what it pays back.
        assert!(at(20, 834) <= 1.0);
        // A day without first sights is never steered above it.
        assert_eq!(paced_at(20, 700, -1).share, 1.0);
    }

    /// A round at hour `h` of day 0, 1,000 fetches a day, `spent_today` of them spent since
    /// midnight, the last day holding first sights `last_day`.
    fn paced_at(h: i64, spent_today: u64, last_day: i64) -> Pacing {
        pace(
            h * 3_600_000,
            1000.0,
            0.0,
            &spent(0, spent_today),
            &[],
            &HashMap::new(),
            Steering {
                last_day: Some(last_day),
            },
        )
    }

    #[test]
    fn a_steered_day_says_what_it_has_left_and_a_free_day_does_not() {
        let at = |h: i64, spent_today: u64, last_day: i64| {
            paced_at(h, spent_today, last_day).rest_of_day
        };
        assert_eq!(at(20, 700, 0), Some((300.0, DAY_MS)));
        assert_eq!(at(20, 700, -1), None);
        // Ahead of the budget since the first fetch (2,500 fetches since yesterday's start,
        // 1,833 earned by 20:00): the payback binds, there is nothing to refill.
        let ahead = Ledger {
            since_ms: Some(-DAY_MS),
            fetches: 2_500,
            day: 0,
            day_fetches: 300,
        };
        let paced = pace(
            20 * 3_600_000,
            1000.0,
            0.0,
            &ahead,
            &[],
            &HashMap::new(),
            Steering { last_day: Some(0) },
        );
        assert!(paced.share < 1.0, "{}", paced.share);
        assert_eq!(paced.rest_of_day, None);
    }

    fn spec(offsets_hours: &[f64], period_hours: f64) -> FeedSpec {
        FeedSpec {
            offsets_seconds: offsets_hours.iter().map(|h| h * 3600.0).collect(),
            period_seconds: period_hours * 3600.0,
            ..Default::default()
        }
    }

    #[test]
    fn the_fetches_a_plan_places_in_a_window_are_counted_over_periods() {
        let h = 3_600_000;
        let daily = spec(&[0.0, 6.0, 12.0, 18.0], 24.0);
        assert_eq!(planned_between([&daily], 10 * h, 24 * h), 2.0);
        assert_eq!(planned_between([&daily], 0, 24 * h), 4.0);
        // Every two days, at 06:00 of the second: nothing on day 0, one on day 1 and day 3.
        let slow = spec(&[30.0], 48.0);
        assert_eq!(planned_between([&slow], 0, 24 * h), 0.0);
        assert_eq!(planned_between([&slow], 24 * h, 48 * h), 1.0);
        assert_eq!(planned_between([&slow], 72 * h, 96 * h), 1.0);
        // Every 90 minutes from 00:30: 16 a day.
        let busy = spec(&[0.5], 1.5);
        assert_eq!(planned_between([&busy], 0, 24 * h), 16.0);
        // A spec with no period places nothing; specs add up.
        let none = spec(&[1.0], 0.0);
        assert_eq!(
            planned_between([&daily, &slow, &busy, &none], 0, 24 * h),
            20.0
        );
        // Values no plan makes count nothing rather than loop or poison the sum.
        let odd = [
            spec(&[f64::NAN, 1e308], 24.0),
            spec(&[1.0], f64::NAN),
            spec(&[1.0], f64::INFINITY),
            spec(&[1.0], 1e-12),
        ];
        assert_eq!(planned_between(&odd, 0, 24 * h), 0.0);
    }

    #[test]
    fn a_plan_short_of_the_days_room_is_remade_at_the_share_that_fills_it() {
        // The last round of day 0 on `steady` at four a day: 75 left, 35 placed.
        let next = refill_share(0.45, 75.0, 35.0).expect("raised");
        assert!((next - 0.45 * 75.0 / 35.0).abs() < 1e-12, "{next}");
        // Within 2%, or within a fetch, it stands.
        assert_eq!(refill_share(1.0, 100.0, 98.5), None);
        assert_eq!(refill_share(1.0, 10.0, 9.2), None);
        // Never above the share's ceiling; nothing placed asks for the ceiling.
        assert_eq!(refill_share(1.4, 100.0, 50.0), Some(MAX_BUDGET_SHARE));
        assert_eq!(refill_share(0.5, 100.0, 0.0), Some(MAX_BUDGET_SHARE));
        assert_eq!(refill_share(MAX_BUDGET_SHARE, 100.0, 50.0), None);
        // No room, or a share of nothing, is left alone.
        assert_eq!(refill_share(0.5, 0.0, 0.0), None);
        assert_eq!(refill_share(0.0, 100.0, 0.0), None);
    }
}
