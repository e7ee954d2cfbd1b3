//! Dealing each UTC day's fetch budget among the workers: their daily allowances.
//!
//! The plan aims at the budget; the allowances hold it (`kairos_runtime::allowance`). Each
//! round gives every worker the fetches it may start today: what the coordinator counted
//! for it so far today, plus its part of what is left of the day's budget, in proportion to
//! the fetches its assignment plans for the rest of the day (first sights due today
//! included). The allowances add up to at most the day's budget less the fetches of
//! workers gone since, so the day cannot spend more than its budget whatever replans,
//! catch-ups or first sights ask. Later days get the budget in proportion to a whole day
//! of each worker's plan, until the next round deals again.

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
    let share = |w: &[f64], i: usize, total: u64| -> u64 {
        let sum: f64 = w.iter().sum();
        if sum > 0.0 {
            (total as f64 * w[i] / sum).floor() as u64
        } else {
            0
        }
    };
    let (rest, whole) = (weights(&rest), weights(&whole));
    workers
        .iter()
        .enumerate()
        .map(|(i, (session, _))| {
            let counted = b.counted.get(name_of(session)).copied().unwrap_or(0);
            let a = Allowance {
                day,
                fetches: counted + share(&rest, i, left),
                later_days: share(&whole, i, per_day),
                counted,
            };
            (session.to_string(), a)
        })
        .collect()
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
