//! Feeds on a timer: postings that land within minutes of the same clock time day after day.
//!
//! A nightly job that bumps a version, a digest sent at six, a podcast released at noon:
//! such a feed's postings are not spread over its busy hour but packed into a few minutes
//! of it. Hourly bins, smoothed onto minutes and pulled toward the population's shapes,
//! spread those minutes over an hour or two, and its plan fetches that much late every
//! day: on `real-commits`, a directory feed with 45 of its 46 postings between 04:11 and
//! 04:31, on 39 of the 40 days it posted, was planned between 05:13 and 06:54, and at one
//! fetch a day its postings waited 643 minutes on average (docs/EXPERIMENTS.md "Feeds on a
//! timer"). This module finds such windows in a feed's dated postings (up to
//! [`MAX_WINDOWS`]: a morning and an evening digest are two); the planner moves each
//! window's share of the feed's postings into it ([`crate::plan::pattern::Peak`]) and
//! leaves its rate alone. On by default
//! (`--no-timer-peaks` turns it off): where no feed is on a timer it finds almost none and
//! the plans are those without it; on a population with timer feeds the delay falls by a few
//! percent (docs/PLANNER.md, "Feeds on a timer").
//!
//! The test is deliberately strict, since a false window costs a feed its fetches'
//! spread: postings on most of the days the feed posted and on at least [`MIN_DAYS`] of
//! them within [`SEARCH_MINUTES`] of each other by the clock, few beside the window
//! ([`MAX_FLANK_SHARE`]), and, with the feed's other windows (each passing the same test),
//! most of its postings. A burst (many postings on one day) is one day.
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

/// Windows a feed may have at most: digests at four times of the day. A feed posting at
/// more clock times holds too little in any four for [`held_share`], and its hourly bins
/// serve it.
pub const MAX_WINDOWS: usize = 4;

/// The feed's windows, from its dated postings (Unix ms, ascending or not), busiest first
/// by the days they hold; empty when they do not show one. The first window is the one the
/// test of the module doc finds; each further one is looked for among the postings the
/// windows before it left, and must hold postings on as many days and pass the same flank
/// test. Together the windows must hold [`held_share`] of the postings, so a morning and an
/// evening digest, each with under half, are found together where neither is alone.
pub fn peaks(times: &[i64]) -> Vec<Peak> {
    let n = times.len();
    if n < MIN_POSTINGS {
        return Vec::new();
    }
    // (time of day in ms, day) for each posting, by time of day.
    let mut rest: Vec<(i64, i64)> = times
        .iter()
        .map(|&t| (t.rem_euclid(DAY_MS), t.div_euclid(DAY_MS)))
        .collect();
    rest.sort_unstable();
    let all_days = {
        let mut d: Vec<i64> = rest.iter().map(|&(_, d)| d).collect();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    let all = rest.clone();
    let mut found: Vec<(Peak, usize)> = Vec::new();
    while found.len() < MAX_WINDOWS {
        let Some(w) = best_window(&rest) else { break };
        if w.days < MIN_DAYS
            || (w.days as f64) < MIN_SHARE * all_days as f64
            || !flanks_clear(&all, &w)
        {
            break;
        }
        // From the first posting in the window to a minute after its last.
        let to = (w.last + MINUTE).max(w.first + MIN_WIDTH_MINUTES * MINUTE);
        let peak = Peak {
            start: (w.first.rem_euclid(DAY_MS) as f64 / DAY_MS as f64) as f32,
            width: ((to - w.first) as f64 / DAY_MS as f64) as f32,
            // A little short of the share seen: the window's next day may come without.
            share: (w.count as f64 / (n as f64 + 1.0)) as f32,
        };
        found.push((peak, w.count));
        // The window's postings leave; the next window is looked for among the others.
        let inside = |t: i64| {
            let from = w.first.rem_euclid(DAY_MS);
            (t - from).rem_euclid(DAY_MS) <= w.last - w.first
        };
        rest.retain(|&(t, _)| !inside(t));
    }
    // The most windows that together hold their share of the postings.
    let mut held = 0;
    let mut keep = 0;
    for (k, &(_, count)) in found.iter().enumerate() {
        held += count;
        if held as f64 >= held_share(k + 1) * n as f64 {
            keep = k + 1;
        }
    }
    found.truncate(keep);
    found.into_iter().map(|(p, _)| p).collect()
}

/// The share of a feed's postings `k` windows must hold together: [`MIN_SHARE`] for one,
/// and for more, what leaves each window a quarter of a window's share outside it
/// (`1 − 1/(2k)`: three quarters for two, five sixths for three). Windows that tile a busy
/// spell leave more than that between them: on 100,000 feeds of the papers' shape, none on
/// a timer, 14 feeds had two windows holding half their postings together, none three
/// quarters.
pub fn held_share(k: usize) -> f64 {
    if k <= 1 {
        MIN_SHARE
    } else {
        1.0 - 1.0 / (2.0 * k as f64)
    }
}

const MINUTE: i64 = 60_000;

/// The window of [`SEARCH_MINUTES`] holding postings on the most days (then the most
/// postings) among `by_time`, (time of day, day) sorted by time of day.
struct Window {
    /// Distinct days with a posting in it.
    days: usize,
    /// Postings in it.
    count: usize,
    /// Time of day of its first posting, ms.
    first: i64,
    /// Time of its last posting, ms from the first one's day (past `DAY_MS` when the
    /// window runs past midnight).
    last: i64,
}

fn best_window(by_time: &[(i64, i64)]) -> Option<Window> {
    let n = by_time.len();
    if n == 0 {
        return None;
    }
    // The postings, then the same shifted by a day so that a window may run past midnight.
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
    let (days, count, first, last) = best?;
    Some(Window {
        days,
        count,
        first: circular[first].0,
        last: circular[last].0,
    })
}

/// Whether the [`SEARCH_MINUTES`] on either side of `w` hold at most [`MAX_FLANK_SHARE`] of
/// its postings, counting all of the feed's postings (`by_time`, by time of day): a window
/// found beside an earlier one has that one's postings at its edge, and is not a second
/// timer but the same busy spell.
fn flanks_clear(by_time: &[(i64, i64)], w: &Window) -> bool {
    let span = SEARCH_MINUTES * MINUTE;
    // Postings whose time of day falls in `[lo, lo + len)`, by the clock, `len` under a day.
    let count_in = |lo: i64, len: i64| {
        let lo = lo.rem_euclid(DAY_MS);
        let below = |x: i64| by_time.partition_point(|&(t, _)| t < x);
        if lo + len <= DAY_MS {
            below(lo + len) - below(lo)
        } else {
            by_time.len() - below(lo) + below(lo + len - DAY_MS)
        }
    };
    let flanks = count_in(w.first - span, span) + count_in(w.last + 1, span);
    flanks as f64 <= MAX_FLANK_SHARE * w.count as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const DAY: i64 = DAY_MS;

    /// The one window the tests of a single timer expect, or `None` (more than one fails).
    fn peak(times: &[i64]) -> Option<Peak> {
        let found = peaks(times);
        assert!(found.len() <= 1, "{found:?}");
        found.into_iter().next()
    }

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

    #[test]
    fn a_morning_and_an_evening_digest_are_two_windows() {
        // 06:02-06:10 on 12 of 14 days, 18:31-18:39 on 11 of them, and three postings at
        // other hours: neither window holds half the feed's 26 postings alone.
        let mut times: Vec<i64> = (0..14)
            .filter(|d| d % 7 != 3)
            .map(|d| at(d, 6, 2 + d % 9))
            .collect();
        times.extend(
            (0..14)
                .filter(|d| d % 5 != 2)
                .map(|d| at(d, 18, 31 + d % 9)),
        );
        times.extend([at(2, 11, 40), at(8, 1, 15), at(12, 14, 5)]);
        times.sort_unstable();
        let n = times.len() as f32;
        let found = peaks(&times);
        assert_eq!(found.len(), 2, "{found:?}");
        let minute = |share: f32| (share as f64 * 1440.0).round() as i64;
        let mut by_start: Vec<(i64, i64, f32)> = found
            .iter()
            .map(|p| (minute(p.start), minute(p.start + p.width), p.share))
            .collect();
        by_start.sort_by_key(|w| w.0);
        assert_eq!((by_start[0].0, by_start[0].1), (6 * 60 + 2, 6 * 60 + 11));
        assert_eq!((by_start[1].0, by_start[1].1), (18 * 60 + 31, 18 * 60 + 40));
        assert!((by_start[0].2 - 12.0 / (n + 1.0)).abs() < 1e-6);
        assert!((by_start[1].2 - 11.0 / (n + 1.0)).abs() < 1e-6);
        // The busier window (by days) comes first.
        assert!(found[0].share > found[1].share);
        // Three and four digests a day are three and four windows. A fifth clock time is
        // not looked for, and four of five hold too little together: none.
        let mut three = times.clone();
        three.extend((0..14).map(|d| at(d, 12, 0)));
        assert_eq!(peaks(&three).len(), 3);
        let mut four = three.clone();
        four.extend((0..14).map(|d| at(d, 22, 0)));
        assert_eq!(peaks(&four).len(), MAX_WINDOWS);
        let mut five = four.clone();
        five.extend((0..14).map(|d| at(d, 3, 30)));
        assert_eq!(peaks(&five), vec![]);
        // Two windows holding half the feed between them, with as many postings spread
        // over the hours between them (a busy spell tiled by windows), are not a timer:
        // two windows must hold three quarters.
        let mut tiled: Vec<i64> = (0..8).map(|d| at(d, 17, 24 + d % 8)).collect();
        tiled.extend((0..7).map(|d| at(d + 1, 19, 14 + d % 9)));
        tiled.extend((0..12).map(|i| at(i % 10, 18, 5 + i * 4)));
        assert_eq!(peaks(&tiled), vec![]);
        // A second clock time on too few days is not a window, and one window then holds
        // too little of the feed alone: nothing.
        let mut sparse: Vec<i64> = (0..14)
            .filter(|d| d % 7 != 3)
            .map(|d| at(d, 6, 2 + d % 9))
            .collect();
        sparse.extend((0..4).map(|d| at(d * 3, 18, 31)));
        sparse.extend((0..10).map(|d| at(d, (d * 5 + 1) % 24, 47)));
        assert_eq!(peaks(&sparse), vec![]);
        // Two postings a day at 06:00 and 06:04 and one at 06:21-06:23 on seven days: the
        // busy spell's edge, not a second timer (it has the first window's postings beside
        // it), so one window.
        let mut spell: Vec<i64> = (0..28).map(|i| at(i / 2, 6, (i % 2) * 4)).collect();
        spell.extend((0..7).map(|d| at(d * 2, 6, 21 + d % 3)));
        let found = peaks(&spell);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!((found[0].start as f64 * 1440.0 - 360.0).abs() < 0.01);
    }
}
