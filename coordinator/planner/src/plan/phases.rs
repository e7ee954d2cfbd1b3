//! Which day of its cycle each quiet feed is fetched on.
//!
//! A feed fetched once every `k` periods costs the same whichever of the `k` it is fetched
//! in (its model repeats every period), so the day is free; but the budget is held per
//! UTC day (the workers' allowances), not on average. A per-feed hash put 35 to 53 of one
//! plan's fetches on each day of a 6-day cycle where the budget was 42.5 (85 feeds of
//! `real-commits`' registries at half a fetch a day), and `real-commits` at half a fetch a
//! day 447 to 471 against 461. A day that asks more than its allowance holds the rest until
//! midnight, and those held fetches then open the next day, which has its own plan to
//! spend: the backlog is a random walk with no pull back, and on those runs 39% and 61% of
//! all fetches started at 00:00 instead of at their planned hours.
//!
//! [`balance`] gives each cycle length's feeds to its days as evenly as whole feeds allow
//! (every day of a `k`-day cycle gets ⌊n/k⌋ or ⌈n/k⌉ of its `n` feeds), the odd ones to the
//! days the longer cycles left lightest. Each feed keeps the day it came with (its hash, or
//! the previous plan's) unless that day is full, so replans move few feeds: a moved feed's
//! next fetch jumps by days.

use super::planner::FeedPlan;
use std::collections::BTreeMap;

/// Days of the load the odd feeds are placed against: the cycles' common multiple, at most
/// this (`lcm(1..=9)`); longer ones are balanced over this many days only.
const MAX_HORIZON: u64 = 2_520;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A fixed pseudo-random order of feeds (by their index): which feeds keep a full day.
fn priority(index: usize) -> u64 {
    let mut x = (index as u64).wrapping_add(0x632b_e59b_d9b4_e019);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Spreads the plans fetched every `k > 1` periods over the `k` periods of their cycle
/// (`phase_period`), starting from the phases they carry. Plans fetched every period are
/// left alone. Deterministic.
pub fn balance(plans: &mut [FeedPlan]) {
    let mut classes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, p) in plans.iter().enumerate() {
        if p.period_multiple > 1 {
            classes.entry(p.period_multiple).or_default().push(i);
        }
    }
    if classes.is_empty() {
        return;
    }
    let horizon = classes
        .keys()
        .fold(1u64, |l, &k| {
            let k = k as u64;
            (l / gcd(l, k) * k).min(MAX_HORIZON + 1)
        })
        .min(MAX_HORIZON) as usize;
    let mut load = vec![0u64; horizon];
    // The largest classes first: their odd feeds are the most to place, and the small
    // classes' few odd feeds can then fill what is left lightest.
    let mut order: Vec<(u32, Vec<usize>)> = classes.into_iter().collect();
    order.sort_by_key(|(k, members)| (std::cmp::Reverse(members.len()), *k));
    for (k, mut members) in order {
        let k = k as usize;
        let n = members.len();
        let mut wanted = vec![0usize; k];
        for &i in &members {
            wanted[plans[i].phase_period as usize % k] += 1;
        }
        // The days that take one feed more, one at a time: the one whose busiest day is
        // lightest, then the lightest on the whole, then the most wanted.
        let mut room = vec![n / k; k];
        let mut odd = load.clone();
        for _ in 0..n % k {
            let r = (0..k)
                .filter(|&r| room[r] == n / k)
                .min_by_key(|&r| {
                    let days = odd.iter().skip(r).step_by(k);
                    let busiest = days.clone().max().copied().unwrap_or(0);
                    (busiest, days.sum::<u64>(), std::cmp::Reverse(wanted[r]), r)
                })
                .expect("fewer odd feeds than days");
            room[r] += 1;
            for d in (r..horizon).step_by(k) {
                odd[d] += 1;
            }
        }
        members.sort_by_key(|&i| (priority(i), i));
        let mut moved = Vec::new();
        for &i in &members {
            let r = plans[i].phase_period as usize % k;
            if room[r] > 0 {
                room[r] -= 1;
                plans[i].phase_period = r as u32;
            } else {
                moved.push(i);
            }
        }
        for i in moved {
            let from = plans[i].phase_period as usize % k;
            let r = (1..=k)
                .map(|s| (from + s) % k)
                .find(|&r| room[r] > 0)
                .expect("the days' room adds up to the class");
            room[r] -= 1;
            plans[i].phase_period = r as u32;
        }
        for &i in &members {
            let r = plans[i].phase_period as usize;
            for d in (r..horizon).step_by(k) {
                load[d] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(k: u32, phase: u32) -> FeedPlan {
        FeedPlan {
            level: 2 - k as i32,
            slots: vec![0],
            period_multiple: k,
            phase_period: phase,
            expected_cost: 1.0,
        }
    }

    /// Fetches on each day `0..days` of the plans.
    fn per_day(plans: &[FeedPlan], days: usize) -> Vec<usize> {
        (0..days)
            .map(|d| {
                plans
                    .iter()
                    .filter(|p| d % p.period_multiple as usize == p.phase_period as usize)
                    .count()
            })
            .collect()
    }

    #[test]
    fn every_day_of_a_cycle_gets_its_share_whatever_the_phases_came_in() {
        // 85 feeds every 3 days, all wanting day 2 (the worst a hash can do).
        let mut plans: Vec<FeedPlan> = (0..85).map(|_| quiet(3, 2)).collect();
        balance(&mut plans);
        let days = per_day(&plans, 3);
        assert_eq!(days.iter().sum::<usize>(), 85);
        assert!(days.iter().all(|&d| d == 28 || d == 29), "{days:?}");
        // Only the feeds day 2 could not hold moved.
        assert_eq!(plans.iter().filter(|p| p.phase_period == 2).count(), 29);
    }

    #[test]
    fn mixed_cycles_stay_within_a_feed_per_cycle_of_even() {
        // Cycles of 2, 3, 4 and 7 days with hashed phases, as the planner gives them.
        let mut plans = Vec::new();
        for (k, n) in [(2u32, 228usize), (3, 68), (4, 111), (7, 284)] {
            for j in 0..n {
                plans.push(quiet(k, (priority(j * 31 + k as usize) % k as u64) as u32));
            }
        }
        let before = per_day(&plans, 84);
        balance(&mut plans);
        let after = per_day(&plans, 84);
        let spread = |v: &[usize]| v.iter().max().unwrap() - v.iter().min().unwrap();
        let mean = 228.0 / 2.0 + 68.0 / 3.0 + 111.0 / 4.0 + 284.0 / 7.0;
        // Each cycle's odd feeds add one on some of its days; with coprime cycles (7, 4, 3)
        // some day has all three and some none: a spread of 3 is the least there is.
        assert_eq!(spread(&after), 3, "{after:?}");
        assert!(spread(&before) > spread(&after), "{before:?}");
        for d in after {
            assert!((d as f64 - mean).abs() <= 2.0, "{d} against {mean}");
        }
    }

    #[test]
    fn a_balanced_plan_keeps_every_phase() {
        let mut plans: Vec<FeedPlan> = (0..12).map(|j| quiet(4, j % 4)).collect();
        plans.push(FeedPlan {
            level: 3,
            slots: vec![0, 10, 20],
            period_multiple: 1,
            phase_period: 0,
            expected_cost: 1.0,
        });
        let before = plans.clone();
        balance(&mut plans);
        assert_eq!(plans, before);
    }
}
