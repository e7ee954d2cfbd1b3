//! What the plan asks of the workers in the coming hour, against what they declared they
//! can carry: the signal the worker autoscaler and the capacity alert read.
//!
//! The plan concentrates fetches where postings and readers are, so the daily average
//! understates the busy hours; the next hour's planned fetches are counted from every
//! feed's actual fetch times (period, offsets, back-off, skipHours and skipDays applied as the workers
//! apply them).

use super::FeedSpec;
use crate::time::{DAY_MS, HOUR_MS};
use kairos_runtime::schedule::skipped;

/// Planned fetches of `spec` at times `t` with `from_ms <= t < to_ms`.
pub fn fetches_between(spec: &FeedSpec, from_ms: i64, to_ms: i64) -> u64 {
    let mut n = 0;
    each_fetch(spec, from_ms, to_ms, |_| n += 1);
    n
}

/// Calls `at` with every planned fetch time `t` of `spec` with `from_ms <= t < to_ms`.
fn each_fetch(spec: &FeedSpec, from_ms: i64, to_ms: i64, mut at: impl FnMut(i64)) {
    let period_ms = (spec.period_seconds * 1000.0).round() as i64;
    if period_ms <= 0 || to_ms <= from_ms || spec.offsets_seconds.is_empty() {
        return;
    }
    let from = from_ms.max(spec.not_before_unix_ms);
    for &off in &spec.offsets_seconds {
        let off_ms = (off * 1000.0).round() as i64;
        // First occurrence at or after `from`: origin + off + k·period.
        let base = spec.origin_unix_ms + off_ms;
        let k = (from - base).div_euclid(period_ms)
            + i64::from((from - base).rem_euclid(period_ms) != 0);
        let mut t = base + k * period_ms;
        while t < to_ms {
            if !skipped(spec.skip_hours, spec.skip_days, t) {
                at(t);
            }
            t += period_ms;
        }
    }
}

/// The load the plan puts on the workers over the next hour.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Demand {
    /// Fetches planned in the next hour, over all feeds.
    pub fetches_next_hour: u64,
    /// The same as a rate, fetches per second.
    pub fetches_per_second: f64,
    /// Sum of the live workers' declared capacity, fetches per second.
    pub capacity_per_second: f64,
    /// Fetches planned in the busiest minute of the next hour: the hour's rate hides a
    /// pile of feeds due at the same minute, which the workers meet all at once.
    pub busiest_minute: u64,
}

impl Demand {
    /// Planned rate over declared capacity: above 1 the workers cannot carry the plan
    /// (infinite with no workers and work to do; 0 with nothing planned).
    pub fn utilization(&self) -> f64 {
        match (
            self.fetches_per_second > 0.0,
            self.capacity_per_second > 0.0,
        ) {
            (false, _) => 0.0,
            (true, false) => f64::INFINITY,
            (true, true) => self.fetches_per_second / self.capacity_per_second,
        }
    }
}

/// The next hour's demand of `specs` from `now_ms`, against `capacity_per_second`.
pub fn next_hour<'a>(
    specs: impl IntoIterator<Item = &'a FeedSpec>,
    now_ms: i64,
    capacity_per_second: f64,
) -> Demand {
    const MINUTE_MS: i64 = 60_000;
    let mut minutes = [0u64; (HOUR_MS / MINUTE_MS) as usize];
    for s in specs {
        each_fetch(s, now_ms, now_ms + HOUR_MS, |t| {
            minutes[((t - now_ms) / MINUTE_MS) as usize] += 1;
        });
    }
    let n: u64 = minutes.iter().sum();
    Demand {
        fetches_next_hour: n,
        fetches_per_second: n as f64 / 3600.0,
        capacity_per_second,
        busiest_minute: minutes.iter().copied().max().unwrap_or(0),
    }
}

/// Days [`days_against_budget`] looks ahead: a weekly plan's every weekday.
pub const DAYS_AHEAD: i64 = 7;

/// The plan's fetches on each of the [`DAYS_AHEAD`] whole UTC days after `now_ms`'s day,
/// over the day's budget `per_day`: `(quietest, busiest)`, or `None` without a budget.
///
/// The workers' allowances hold every UTC day to its budget, so a plan that asks more of
/// one day than the budget gives is not executed as planned: the allowance holds the
/// excess to the next day, where that day's own plan is waiting. A daily plan asks the
/// same of every day; a weekly one ([`crate::control::settings`]'s `weekly`) is solved
/// over the week, and without a price per day it put more fetches on the days feeds post
/// most (docs/EXPERIMENTS.md, "Weekly plans against the day's budget"); its day prices
/// (`plan::days`) step toward even days each round, and this shows whether they got there.
pub fn days_against_budget<'a>(
    specs: impl IntoIterator<Item = &'a FeedSpec>,
    now_ms: i64,
    per_day: f64,
) -> Option<(f64, f64)> {
    if !(per_day > 0.0 && per_day.is_finite()) {
        return None;
    }
    let first = (now_ms.div_euclid(DAY_MS) + 1) * DAY_MS;
    let end = first + DAYS_AHEAD * DAY_MS;
    let mut days = [0u64; DAYS_AHEAD as usize];
    for s in specs {
        each_fetch(s, first, end, |t| {
            days[((t - first) / DAY_MS) as usize] += 1;
        });
    }
    let share = |n: u64| n as f64 / per_day;
    let (lo, hi) = days
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n)));
    Some((share(lo), share(hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(offsets: &[f64], period_s: f64, origin: i64) -> FeedSpec {
        FeedSpec {
            id: "f".into(),
            url: "https://x.example/f".into(),
            host: "x.example".into(),
            offsets_seconds: offsets.to_vec(),
            period_seconds: period_s,
            origin_unix_ms: origin,
            not_before_unix_ms: 0,
            first_fetch_unix_ms: 0,
            skip_hours: 0,
            skip_days: 0,
            timed: false,
        }
    }

    /// Every planned time listed one by one, the slow obvious way.
    fn brute(s: &FeedSpec, from: i64, to: i64) -> u64 {
        let p = (s.period_seconds * 1000.0).round() as i64;
        let mut n = 0;
        for k in -2000..2000 {
            for &o in &s.offsets_seconds {
                let t = s.origin_unix_ms + (o * 1000.0).round() as i64 + k * p;
                let hour = t.div_euclid(HOUR_MS).rem_euclid(24) as u32;
                let weekday = (t.div_euclid(24 * HOUR_MS) + 3).rem_euclid(7) as u32;
                let off = s.skip_hours & (1 << hour) != 0 || s.skip_days & (1 << weekday) != 0;
                if t >= from.max(s.not_before_unix_ms) && t < to && !off {
                    n += 1;
                }
            }
        }
        n
    }

    #[test]
    fn counts_agree_with_listing_every_fetch() {
        let day = 86_400.0;
        let cases = [
            spec(&[0.0, 3_600.0, 7_200.5, 86_399.0], day, 1_700_000_000_000),
            spec(&[10.0, 500.0], 600.0, 1_700_000_123_456),
            spec(&[40_000.0], 7.0 * day, 1_699_000_000_000),
            spec(&[1.0, 2.0, 3.0], 3.0 * day, 1_700_000_000_000),
        ];
        for (i, base) in cases.iter().enumerate() {
            for (not_before, skip, days) in [
                (0, 0, 0),
                (1_700_000_500_000, 0, 0),
                (0, 0b1111_0000_0000, 0),
                (0, 0, 0b110_0000),
            ] {
                let mut s = base.clone();
                s.not_before_unix_ms = not_before;
                s.skip_hours = skip;
                s.skip_days = days;
                for from in (0..40).map(|k| 1_700_000_000_000 + k * 1_234_567) {
                    for len in [1, 3_600_000, 86_400_000, 5 * 86_400_000] {
                        assert_eq!(
                            fetches_between(&s, from, from + len),
                            brute(&s, from, from + len),
                            "case {i}, from {from}, len {len}, not before {not_before}, skip {skip:b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_day_of_a_daily_plan_is_its_fetch_count() {
        let s = spec(&[100.0, 200.0, 40_000.0, 80_000.0], 86_400.0, 0);
        for from in [0, 5_000_000, 86_399_999] {
            assert_eq!(fetches_between(&s, from, from + 86_400_000), 4);
        }
        // One per 10-minute period: 6 in an hour from any start.
        let s = spec(&[42.0], 600.0, 0);
        let d = next_hour([&s, &s], 123_456, 0.01);
        assert_eq!(d.fetches_next_hour, 12);
        // Both feeds at the same second of each 10-minute period.
        assert_eq!(d.busiest_minute, 2);
        assert!((d.fetches_per_second - 12.0 / 3600.0).abs() < 1e-12);
        assert!((d.utilization() - 12.0 / 36.0).abs() < 1e-9);
    }

    #[test]
    fn the_busiest_minute_counts_a_pile() {
        let hour = 3_600_000;
        // Thirty feeds due at 00:10:30 and one every minute on the hour's other minutes.
        let piled: Vec<FeedSpec> = (0..30).map(|_| spec(&[630.0], 3_600.0, 0)).collect();
        let even = spec(&[5.0], 60.0, 0);
        let d = next_hour(piled.iter().chain([&even]), 5 * hour, 1.0);
        assert_eq!(d.fetches_next_hour, 90);
        assert_eq!(d.busiest_minute, 31);
        // From 05:10:31 the pile falls in the hour's last minute.
        let d = next_hour(piled.iter().chain([&even]), 5 * hour + 631_000, 1.0);
        assert_eq!(d.fetches_next_hour, 90);
        assert_eq!(d.busiest_minute, 31);
        let d = next_hour(std::iter::once(&even), 0, 1.0);
        assert_eq!(d.busiest_minute, 1);
        assert_eq!(next_hour(std::iter::empty(), 0, 1.0).busiest_minute, 0);
    }

    #[test]
    fn a_weekly_plans_days_are_read_against_the_days_budget() {
        let day = 86_400.0;
        // Two feeds at four fetches a day: one on every day; one on the week's first five
        // days only (20 a week), its origin a Monday.
        let monday = 4 * 86_400_000; // 1970-01-05
        let every = spec(&[0.0, 21_600.0, 43_200.0, 64_800.0], day, monday);
        let offs: Vec<f64> = (0..5)
            .flat_map(|d| [0.0, 6.0, 12.0, 18.0].map(|h| d as f64 * day + h * 3_600.0))
            .collect();
        let weekdays = spec(&offs, 7.0 * day, monday);
        // From any moment, the next seven whole days hold five weekdays and a weekend.
        for now in [monday, monday + 1, monday + 3 * 86_400_000 + 7] {
            let (lo, hi) = days_against_budget([&every, &weekdays], now, 8.0).unwrap();
            assert!(
                (lo - 0.5).abs() < 1e-12 && (hi - 1.0).abs() < 1e-12,
                "{lo} {hi}"
            );
            // Eight a day of budget is spent; a week of six a day is not, and a weekday
            // asks a third more than the budget gives.
            let (lo, hi) = days_against_budget([&every, &weekdays], now, 6.0).unwrap();
            assert!((lo - 4.0 / 6.0).abs() < 1e-12 && (hi - 8.0 / 6.0).abs() < 1e-12);
        }
        // Counted as `fetches_between` counts, day by day.
        let now = monday + 123_456;
        let first = (now / 86_400_000 + 1) * 86_400_000;
        let per_day: Vec<u64> = (0..7)
            .map(|d| {
                let from = first + d * 86_400_000;
                fetches_between(&weekdays, from, from + 86_400_000)
            })
            .collect();
        let (lo, hi) = days_against_budget([&weekdays], now, 4.0).unwrap();
        assert_eq!(lo, *per_day.iter().min().unwrap() as f64 / 4.0);
        assert_eq!(hi, *per_day.iter().max().unwrap() as f64 / 4.0);
        assert_eq!(days_against_budget([&every], now, 0.0), None);
        assert_eq!(days_against_budget([&every], now, f64::INFINITY), None);
        assert_eq!(days_against_budget([&every], now, f64::NAN), None);
        assert_eq!(days_against_budget([&every], now, -4.0), None);
        // A budget no plan comes near: shares of nothing, finite.
        let (lo, hi) = days_against_budget([&every], now, 1e308).unwrap();
        assert!(lo >= 0.0 && hi > 0.0 && hi < 1e-300, "{lo} {hi}");
        assert_eq!(days_against_budget([], now, 4.0), Some((0.0, 0.0)));
    }

    #[test]
    fn utilization_edges() {
        let none = Demand::default();
        assert_eq!(none.utilization(), 0.0);
        let orphan = Demand {
            fetches_next_hour: 10,
            fetches_per_second: 10.0 / 3600.0,
            capacity_per_second: 0.0,
            busiest_minute: 10,
        };
        assert!(orphan.utilization().is_infinite());
    }
}
