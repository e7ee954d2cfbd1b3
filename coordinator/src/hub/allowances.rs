//! Dealing each UTC day's fetch budget among the workers: their daily allowances.
//!
//! The plan aims at the budget; the allowances hold it (`kairos_runtime::allowance`). Each
//! round gives every worker the fetches it may start today: what the coordinator counted
//! for it so far today, plus its part of what is left of the day's budget, in proportion to
//! the fetches its assignment plans for the rest of the day (first sights due today
//! included). The allowances add up to at most the day's budget less the fetches of
//! workers gone since, so the day cannot spend more than its budget whatever replans,
//! catch-ups or first sights ask. Later days get the budget in proportion to a whole day
//! of each worker's plan, until the next round deals again. A cap on fetches a minute is
//! dealt the same way, at least one a minute each (`kairos_runtime::minute_gate`).

use crate::control::capacity::fetches_between;
use crate::control::cluster::name_of;
use crate::control::FeedSpec;
use kairos_runtime::allowance::{Allowance, DAY_MS};
use std::collections::{BTreeMap, HashMap};

/// What the day's budget stands at when a round deals it.
#[derive(Clone, Debug)]
pub struct DayBudget<'a> {
    /// The round's time, Unix ms.
    pub now_ms: i64,
    /// Fetches a day.
    pub per_day: f64,
    /// Fetches counted today, every worker's (gone ones' too).
    pub today: u64,
    /// Fetches counted today per worker name.
    pub counted: &'a BTreeMap<String, u64>,
    /// First-fetch times of feeds not yet fetched (those due today count for their worker).
    pub first_sights: &'a HashMap<String, i64>,
    /// The cluster's cap on fetches a minute (`--max-fetches-per-minute`), if any.
    pub per_minute: Option<f64>,
}

/// The allowance of every session in `workers` (session id, its feeds).
pub fn deal(
    b: &DayBudget,
    workers: &[(&str, &BTreeMap<String, FeedSpec>)],
) -> HashMap<String, Allowance> {
    let day = b.now_ms.div_euclid(DAY_MS);
    let day_end = (day + 1) * DAY_MS;
    let per_day = if b.per_day.is_finite() {
        b.per_day.max(0.0).floor() as u64
    } else {
        u64::MAX / 4
    };
    let left = per_day.saturating_sub(b.today);
    let planned = |feeds: &BTreeMap<String, FeedSpec>, from: i64, to: i64| -> u64 {
        feeds
            .values()
            .map(|s| {
                // A first sight already due is due now.
                let first = match b.first_sights.get(&s.id).map(|&t| t.max(b.now_ms)) {
                    Some(at) if at >= from && at < to => 1,
                    _ => 0,
                };
                fetches_between(s, from, to) + first
            })
            .sum()
    };
    let rest: Vec<u64> = workers
        .iter()
        .map(|(_, f)| planned(f, b.now_ms, day_end))
        .collect();
    let whole: Vec<u64> = workers
        .iter()
        .map(|(_, f)| planned(f, day_end, day_end + DAY_MS))
        .collect();
    // With nothing planned, the budget goes by feed count.
    let weights = |w: &[u64]| -> Vec<f64> {
        if w.iter().sum::<u64>() > 0 {
            w.iter().map(|&x| x as f64).collect()
        } else {
            workers.iter().map(|(_, f)| f.len() as f64).collect()
        }
    };
    let today = apportion(left, &weights(&rest));
    let later = apportion(per_day, &weights(&whole));
    // The cap dealt like a whole day, at least one a minute each: a worker with no share
    // would hold every catch-up and first sight for good.
    let minutes = b.per_minute.map(|cap| {
        // Held well below u64::MAX, so the parts' sum cannot overflow.
        let cap = cap.max(0.0).min((u64::MAX / 4) as f64) as u64;
        apportion(cap, &weights(&whole))
    });
    workers
        .iter()
        .enumerate()
        .map(|(i, (session, _))| {
            let counted = b.counted.get(name_of(session)).copied().unwrap_or(0);
            let a = Allowance {
                day,
                fetches: counted + today[i],
                later_days: later[i],
                counted,
                per_minute: minutes.as_ref().map(|m| m[i].max(1)),
            };
            (session.to_string(), a)
        })
        .collect()
}

/// `total` split in proportion to `weights`, in whole fetches that add up to `total`
/// (nothing when every weight is zero): each part rounded down, then the fetches left go
/// one each to the largest remainders (ties to the earlier worker). Rounding every part
/// down dealt up to one fetch per worker less than the day's budget: on the wall-clock farm
/// (two workers) every day spent 2,390-2,399 of its 2,400 fetches.
fn apportion(total: u64, weights: &[f64]) -> Vec<u64> {
    // Weights that are not finite and positive get nothing; the rest are taken over the
    // largest, so even huge ones sum to a finite number.
    let top = weights
        .iter()
        .copied()
        .filter(|w| w.is_finite() && *w > 0.0)
        .fold(0.0, f64::max);
    if top <= 0.0 || total == 0 {
        return vec![0; weights.len()];
    }
    let clean: Vec<f64> = weights
        .iter()
        .map(|&w| {
            if w.is_finite() && w > 0.0 {
                w / top
            } else {
                0.0
            }
        })
        .collect();
    let sum: f64 = clean.iter().sum();
    let exact: Vec<f64> = clean.iter().map(|&w| total as f64 * w / sum).collect();
    let mut parts: Vec<u64> = exact.iter().map(|&x| x.floor() as u64).collect();
    let dealt: u64 = parts.iter().sum();
    let mut order: Vec<usize> = (0..parts.len()).filter(|&i| exact[i] > 0.0).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    // Floating error can leave the floors a fetch above or below what their sum should be.
    for &i in order
        .iter()
        .cycle()
        .take(total.saturating_sub(dealt) as usize)
    {
        parts[i] += 1;
    }
    let mut over = dealt.saturating_sub(total);
    for &i in order.iter().rev() {
        if over == 0 {
            break;
        }
        if parts[i] > 0 {
            parts[i] -= 1;
            over -= 1;
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` feeds fetched every `every_h` hours from midnight.
    fn feeds(prefix: &str, n: usize, every_h: f64) -> BTreeMap<String, FeedSpec> {
        (0..n)
            .map(|i| {
                let id = format!("{prefix}{i}");
                let spec = FeedSpec {
                    id: id.clone(),
                    host: id.clone(),
                    offsets_seconds: vec![0.0],
                    period_seconds: every_h * 3600.0,
                    ..Default::default()
                };
                (id, spec)
            })
            .collect()
    }

    #[test]
    fn the_days_budget_is_dealt_by_what_each_worker_plans_for_the_rest_of_the_day() {
        let a = feeds("a", 30, 6.0); // 4 a day each: 120 a day
        let b = feeds("b", 10, 6.0); // 40 a day
        let counted = BTreeMap::from([("wa".to_string(), 50u64), ("wb".to_string(), 30)]);
        let first = HashMap::new();
        // Noon of day 2: a plans 60 more fetches today, b 20; 100 counted (20 by a worker
        // gone since), budget 160.
        let budget = DayBudget {
            now_ms: 2 * DAY_MS + DAY_MS / 2,
            per_day: 160.0,
            today: 100,
            counted: &counted,
            first_sights: &first,
            per_minute: None,
        };
        let out = deal(&budget, &[("wa#1", &a), ("wb#7", &b)]);
        let (wa, wb) = (out["wa#1"], out["wb#7"]);
        assert_eq!(wa.day, 2);
        // 60 left, dealt 3:1.
        assert_eq!((wa.fetches, wa.counted), (50 + 45, 50));
        assert_eq!((wb.fetches, wb.counted), (30 + 15, 30));
        assert!(wa.fetches + wb.fetches + 20 <= 160);
        assert_eq!((wa.later_days, wb.later_days), (120, 40));
        // A day already spent deals nothing more.
        let spent = DayBudget {
            today: 170,
            ..budget.clone()
        };
        let out = deal(&spent, &[("wa#1", &a), ("wb#7", &b)]);
        assert_eq!(out["wa#1"].fetches, 50);
        assert_eq!(out["wb#7"].fetches, 30);
    }

    #[test]
    fn the_minute_cap_is_dealt_like_a_whole_day_at_least_one_each() {
        let a = feeds("a", 30, 6.0); // 120 a day
        let b = feeds("b", 10, 6.0); // 40 a day
        let c = feeds("c", 1, 24.0); // 1 a day
        let counted = BTreeMap::new();
        let first = HashMap::new();
        let budget = DayBudget {
            now_ms: 2 * DAY_MS,
            per_day: 161.0,
            today: 0,
            counted: &counted,
            first_sights: &first,
            per_minute: Some(8.5),
        };
        let out = deal(&budget, &[("wa#1", &a), ("wb#2", &b), ("wc#3", &c)]);
        // 8 a minute split 120:40:1 is 5.96, 1.99, 0.05: 6 and 2, and the small worker
        // one all the same.
        let shares: Vec<_> = ["wa#1", "wb#2", "wc#3"]
            .iter()
            .map(|w| out[*w].per_minute)
            .collect();
        assert_eq!(shares, vec![Some(6), Some(2), Some(1)]);
        let none = deal(
            &DayBudget {
                per_minute: None,
                ..budget
            },
            &[("wa#1", &a)],
        );
        assert_eq!(none["wa#1"].per_minute, None);
        // Extreme caps deal finite shares and no overflow.
        for cap in [1e308, f64::INFINITY, 0.0] {
            let out = deal(
                &DayBudget {
                    per_minute: Some(cap),
                    ..budget.clone()
                },
                &[("wa#1", &a), ("wb#2", &b)],
            );
            let (x, y) = (
                out["wa#1"].per_minute.unwrap(),
                out["wb#2"].per_minute.unwrap(),
            );
            assert!(
                x >= 1 && y >= 1 && x.checked_add(y).is_some(),
                "{cap}: {x} {y}"
            );
        }
    }

    #[test]
    fn the_parts_add_up_to_the_whole_budget() {
        // Two equal workers and an odd budget: rounding each half down lost a fetch a day.
        assert_eq!(apportion(2399, &[1.0, 1.0]), vec![1200, 1199]);
        assert_eq!(apportion(2400, &[1259.0, 1141.0]), vec![1259, 1141]);
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        // The largest remainder gets the fetch left over, whatever its place.
        assert_eq!(apportion(10, &[1.0, 2.0, 4.0]), vec![1, 3, 6]);
        assert_eq!(apportion(7, &[0.0, 0.0]), vec![0, 0]);
        assert_eq!(apportion(7, &[0.0, f64::NAN, 3.0]), vec![0, 0, 7]);
        assert_eq!(apportion(0, &[1.0]), vec![0]);
        assert_eq!(apportion(5, &[f64::MAX, f64::MAX, -1.0]), vec![3, 2, 0]);
        assert_eq!(apportion(5, &[1e-300, f64::INFINITY]), vec![5, 0]);
        // Many workers with weights that do not divide the total.
        let w: Vec<f64> = (1..=17).map(|i| (i * i) as f64 * 0.37).collect();
        for total in [0u64, 1, 16, 17, 1_000, 2_400, 123_457] {
            let p = apportion(total, &w);
            assert_eq!(p.iter().sum::<u64>(), total, "total {total}");
            let sum: f64 = w.iter().sum();
            for (x, wi) in p.iter().zip(&w) {
                let exact = total as f64 * wi / sum;
                assert!((*x as f64 - exact).abs() < 1.0, "{x} against {exact}");
            }
        }
    }

    #[test]
    fn two_workers_are_dealt_the_whole_day() {
        let a = feeds("a", 7, 8.0); // 3 a day each
        let b = feeds("b", 7, 8.0);
        let counted = BTreeMap::new();
        let first = HashMap::new();
        let budget = DayBudget {
            now_ms: 5 * DAY_MS,
            per_day: 41.0,
            today: 0,
            counted: &counted,
            first_sights: &first,
            per_minute: None,
        };
        let out = deal(&budget, &[("wa#1", &a), ("wb#2", &b)]);
        assert_eq!(out["wa#1"].fetches + out["wb#2"].fetches, 41);
        assert_eq!(out["wa#1"].later_days + out["wb#2"].later_days, 41);
    }

    #[test]
    fn first_sights_due_today_count_for_their_worker_and_empty_plans_split_by_feeds() {
        let a = feeds("a", 10, 24.0 * 7.0);
        let b = feeds("b", 30, 24.0 * 7.0);
        // Origin at 0 with a weekly period: none of them falls in day 3's afternoon.
        let counted = BTreeMap::new();
        let now = 3 * DAY_MS + DAY_MS / 2;
        let none = HashMap::new();
        let budget = DayBudget {
            now_ms: now,
            per_day: 40.0,
            today: 0,
            counted: &counted,
            first_sights: &none,
            per_minute: None,
        };
        let out = deal(&budget, &[("wa#1", &a), ("wb#2", &b)]);
        assert_eq!((out["wa#1"].fetches, out["wb#2"].fetches), (10, 30));
        // a's ten first sights are due today, b's tomorrow: today goes to a.
        let mut first: HashMap<String, i64> = a.keys().map(|id| (id.clone(), now)).collect();
        first.extend(b.keys().map(|id| (id.clone(), 4 * DAY_MS)));
        let budget = DayBudget {
            first_sights: &first,
            ..budget
        };
        let out = deal(&budget, &[("wa#1", &a), ("wb#2", &b)]);
        assert_eq!((out["wa#1"].fetches, out["wb#2"].fetches), (40, 0));
        assert_eq!(name_of("wa#1"), "wa");
        assert_eq!(name_of("plain"), "plain");
        assert_eq!(name_of("a#b#3"), "a#b");
    }
}
