//! Feeds on a timer: postings that land within minutes of the same clock time day after day.
//!
//! A nightly job that bumps a version, a digest sent at six, a podcast released at noon:
//! such a feed's postings are not spread over its busy hour but packed into a few minutes
//! of it. Hourly bins, smoothed onto minutes and pulled toward the population's shapes,
//! spread those minutes over an hour or two, and its plan fetches that much late every
//! day: on `real-commits`, a directory feed with 45 of its 46 postings between 04:11 and
//! 04:31, on 39 of the 40 days it posted, was planned between 05:13 and 06:54, and at one
//! fetch a day its postings waited 643 minutes on average (docs/RESULTS.md "Feeds on a
//! timer"). This module finds such a window
//! in a feed's dated postings; the planner moves the window's share of the feed's postings
//! into it ([`crate::plan::pattern::Peak`]) and leaves its rate alone. On by default
//! (`--no-timer-peaks` turns it off): where no feed is on a timer it finds almost none and
//! the plans are those without it; on a population with timer feeds the delay falls by a few
//! percent (docs/PLANNER.md, "Feeds on a timer").
//!
//! The test is deliberately strict, since a false window costs a feed its fetches'
//! spread: most of the feed's postings, on most of the days it posted and on at least
//! [`MIN_DAYS`] of them, within [`SEARCH_MINUTES`] of each other by the clock, and few
//! beside the window ([`MAX_FLANK_SHARE`]). A burst (many postings on one day) is one day.
//! A feed posting once a day at random times meets the test rarely: simulated (before the
//! flank test), 3 and 8 of 200,000 such feeds with 8 and 10 postings did, none with 6 or
//! 14. Feeds with a narrow busy hour and few postings meet it more often: on 100,000 feeds
//! of the papers' shape (`synth --feeds 100000 --days 14`, none on a timer), 62 pass (73
//! without the flank test), each with a handful of postings in a day's busiest 20
//! minutes; their fetch moves to just after that window, inside the hour they post in.

use crate::plan::pattern::Peak;
use crate::time::DAY_MS;
use std::collections::HashMap;

/// Postings in the learning window a feed needs before its window is looked for.
pub const MIN_POSTINGS: usize = 6;
/// Distinct days with a posting in the window it needs.
pub const MIN_DAYS: usize = 5;
/// Length of the window searched for, minutes: a timer's postings land within minutes of
/// their time (a job's run time, a queue's delay), and twenty holds the real trace's
/// nightly jobs (their postings spread over 15 minutes).
pub const SEARCH_MINUTES: i64 = 20;
/// Share of the feed's postings, and of the days it posted on, the window must hold.
pub const MIN_SHARE: f64 = 0.5;
/// Postings in the [`SEARCH_MINUTES`] before and after the window, at most, over the
/// window's own: a timer's postings stop at its window's edges, while a feed with a narrow
/// busy hour that happened to put half its few postings in one window has as many just
/// beside it. Without this, 73 of 100,000 feeds of the papers' shape (none on a timer; a
/// twelfth have a busy hour with a standard deviation of 48 minutes) passed.
pub const MAX_FLANK_SHARE: f64 = 0.25;
/// The shortest window a peak is given, minutes: a fetch one minute after a timer's time
/// would often come before its posting is in the feed.
const MIN_WIDTH_MINUTES: i64 = 2;

/// The feed's window, from its dated postings (Unix ms, ascending or not), or `None` when
/// they do not show one.
pub fn peak(times: &[i64]) -> Option<Peak> {
    let n = times.len();
    if n < MIN_POSTINGS {
        return None;
    }
    const MINUTE: i64 = 60_000;
    // (time of day in ms, day) for each posting, by time of day, then the same shifted by a
    // day so that a window may run past midnight.
    let mut by_time: Vec<(i64, i64)> = times
        .iter()
        .map(|&t| (t.rem_euclid(DAY_MS), t.div_euclid(DAY_MS)))
        .collect();
    by_time.sort_unstable();
    let all_days = {
        let mut d: Vec<i64> = times.iter().map(|&t| t.div_euclid(DAY_MS)).collect();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    let circular: Vec<(i64, i64)> = by_time
        .iter()
        .copied()
        .chain(by_time.iter().map(|&(t, d)| (t + DAY_MS, d)))
        .collect();
    let span = SEARCH_MINUTES * MINUTE;
    // (days, postings, first index, last index) of the best window starting at a posting.
    // One sweep: the window's postings per day are counted as its ends move, so a feed
    // of thousands of postings in one window (a flood every day) costs no more than
    // its postings.
    let mut best: Option<(usize, usize, usize, usize)> = None;
    let mut per_day: HashMap<i64, u32> = HashMap::new();
    per_day.insert(circular[0].1, 1);
    let mut end = 0;
    for start in 0..n {
        if end < start {
            end = start;
            *per_day.entry(circular[end].1).or_insert(0) += 1;
        }
        while end + 1 < start + n && circular[end + 1].0 - circular[start].0 < span {
            end += 1;
            *per_day.entry(circular[end].1).or_insert(0) += 1;
        }
        let key = (per_day.len(), end - start + 1);
        if best.is_none_or(|(d, c, _, _)| key > (d, c)) {
            best = Some((key.0, key.1, start, end));
        }
        // The window's first posting leaves before the next start.
        let day = circular[start].1;
        if let Some(c) = per_day.get_mut(&day) {
            *c -= 1;
            if *c == 0 {
                per_day.remove(&day);
            }
        }
    }
    let (in_days, count, first, last) = best?;
    if in_days < MIN_DAYS
        || (in_days as f64) < MIN_SHARE * all_days as f64
        || (count as f64) < MIN_SHARE * n as f64
    {
        return None;
    }
    // Postings whose time of day falls in `[lo, lo + len)`, by the clock (`circular` holds
    // every posting twice, a day apart, in order).
    let count_in = |lo: i64, len: i64| {
        let lo = lo.rem_euclid(DAY_MS);
        circular.partition_point(|&(t, _)| t < lo + len)
            - circular.partition_point(|&(t, _)| t < lo)
    };
    let flanks = count_in(circular[first].0 - span, span) + count_in(circular[last].0 + 1, span);
    if flanks as f64 > MAX_FLANK_SHARE * count as f64 {
        return None;
    }
    // From the first posting in the window to a minute after its last.
    let from = circular[first].0;
    let to = (circular[last].0 + MINUTE).max(from + MIN_WIDTH_MINUTES * MINUTE);
    Some(Peak {
        start: (from.rem_euclid(DAY_MS) as f64 / DAY_MS as f64) as f32,
        width: ((to - from) as f64 / DAY_MS as f64) as f32,
        // A little short of the share seen: the window's next day may come without.
        share: (count as f64 / (n as f64 + 1.0)) as f32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const DAY: i64 = DAY_MS;

    fn at(day: i64, hour: i64, minute: i64) -> i64 {
        1_700_006_400_000 + day * DAY + hour * 60 * MIN + minute * MIN
    }

    #[test]
    fn a_nightly_job_is_found_and_its_window_spans_its_postings() {
        // 04:15–04:29 on 12 of 14 days, two postings at other hours.
        let mut times: Vec<i64> = (0..12).map(|d| at(d, 4, 15 + (d * 7) % 15)).collect();
        times.push(at(3, 13, 2));
        times.push(at(9, 20, 40));
        let p = peak(&times).expect("a window");
        let start_min = (p.start as f64 * 1440.0).round() as i64;
        let end_min = ((p.start + p.width) as f64 * 1440.0).round() as i64;
        assert_eq!(start_min, 4 * 60 + 15);
        assert_eq!(end_min, 4 * 60 + 29 + 1);
        assert!((p.share - 12.0 / 15.0).abs() < 1e-6, "{}", p.share);
    }

    #[test]
    fn a_window_across_midnight_wraps() {
        let times: Vec<i64> = (0..8)
            .map(|d| {
                if d % 2 == 0 {
                    at(d, 23, 55)
                } else {
                    at(d, 0, 5)
                }
            })
            .collect();
        let p = peak(&times).expect("a window");
        assert!((p.start as f64 * 1440.0 - (23.0 * 60.0 + 55.0)).abs() < 0.01);
        assert!(
            (p.width as f64 * 1440.0 - 11.0).abs() < 0.01,
            "{}",
            p.width * 1440.0
        );
    }

    #[test]
    fn bursts_random_times_and_office_hours_show_none() {
        // A burst of 30 in one hour on one day, then a posting a day at other times.
        let mut burst: Vec<i64> = (0..30).map(|i| at(2, 10, i)).collect();
        burst.extend((0..6).map(|d| at(d + 3, (d * 5) % 24, 3)));
        assert_eq!(peak(&burst), None);
        // Spread at random over office hours (a fixed pseudo-random sequence), 40 days.
        let mut x: u64 = 12345;
        let mut rand = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as i64
        };
        let office: Vec<i64> = (0..40)
            .map(|d| at(d, 9 + rand() % 8, rand() % 60))
            .collect();
        assert_eq!(peak(&office), None);
        // Five days are needed: four at the same minute are not enough.
        let four: Vec<i64> = (0..4)
            .map(|d| at(d, 6, 0))
            .chain([at(5, 12, 0), at(6, 18, 0)])
            .collect();
        assert_eq!(peak(&four), None);
        // Too few postings, or the same minute on under half the days it posted.
        assert_eq!(peak(&[at(0, 6, 0), at(1, 6, 0)]), None);
        let half: Vec<i64> = (0..5)
            .map(|d| at(d, 6, 0))
            .chain((5..16).map(|d| at(d, (d * 7) % 24, 30)))
            .collect();
        assert_eq!(peak(&half), None);
        // A narrow busy hour: 6 of 10 postings within 09:07-09:14, the rest just beside
        // them (08:52 and 09:30). Enough for the window; its flanks say it is not one.
        // Six days at 09:07-09:14; days 0 and 5 at the first (hour, minute), 1 and 6 at the
        // second.
        let with_others = |a: (i64, i64), b: (i64, i64)| -> Vec<i64> {
            (0..10)
                .map(|d| match d % 5 {
                    0 => at(d, a.0, a.1),
                    1 => at(d, b.0, b.1),
                    _ => at(d, 9, 5 + d),
                })
                .collect()
        };
        assert_eq!(peak(&with_others((8, 52), (9, 30))), None);
        // The same with the others hours away is a timer.
        assert!(peak(&with_others((3, 45), (15, 25))).is_some());
    }

    #[test]
    fn a_daily_flood_is_found_quickly_and_extreme_times_stay_in_range() {
        // 4,096 postings, 400 a day within ten minutes at 09:00 (the window sweep is
        // linear: the earlier form sorted each window's days, 4,096 times over).
        let times: Vec<i64> = (0..4096).map(|i| at(i / 400, 9, (i % 400) / 40)).collect();
        let p = peak(&times).expect("a window");
        assert!((p.start as f64 * 1440.0 - 540.0).abs() < 0.01);
        assert!(p.share > 0.99);
        // Times far from now, before 1970 and near the ends of i64: finite, in range.
        for t in [i64::MIN / 2, -DAY * 1000, 0, i64::MAX / 2] {
            let times: Vec<i64> = (0..8).map(|d| t + d * DAY).collect();
            let p = peak(&times).expect("a window");
            assert!((0.0..1.0).contains(&p.start) && p.width > 0.0 && p.share <= 1.0);
        }
    }

    #[test]
    fn the_same_minute_every_day_gets_the_shortest_window() {
        let times: Vec<i64> = (0..10).map(|d| at(d, 6, 0)).collect();
        let p = peak(&times).expect("a window");
        assert!((p.width as f64 * 1440.0 - MIN_WIDTH_MINUTES as f64).abs() < 0.01);
        assert!((p.share - 10.0 / 11.0).abs() < 1e-6);
    }
}
