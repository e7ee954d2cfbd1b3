//! The event-driven update of one feed between rounds.
//!
//! A round relearns every feed and re-solves the allocation; at a million feeds that takes
//! minutes, and a feed whose fetch just found a burst, or a quiet feed that woke up, would
//! wait for it with the plan of a feed that posts nothing. So a fetch whose new postings
//! its model did not expect ([`surprised`]: fewer than one chance in a hundred under the
//! model's own rates over the interval since the previous fetch) re-learns that feed at
//! once, against what the last round learned of everyone ([`Population`]), and re-solves
//! it alone at the last round's price of a fetch ([`resolve_one`]). Nothing else moves.
//!
//! What it may spend: a raise adds fetches the round did not budget, so raises together
//! may add at most [`QUICK_SHARE`] of the day's budget until the next round re-balances
//! (the workers' daily allowances hold the day within its budget whatever the plan asks).
//! What it leaves out: the host level (`--host-level`: the feed's rate is shrunk toward
//! the typical feed's, not its host's, until the round) and weekly models (not updated
//! between rounds).

use super::feedstate::FeedState;
use super::population::{tally, Population};
use super::recency;
use super::relearn::{fetch_times, flat};
use crate::plan::alloc::{level_rate, Level};
use crate::plan::planner::{FeedModel, FeedPlan, PlanConfig};
use crate::plan::single::resolve_one;
use crate::plan::Prices;
use crate::time::DAY_MS;

/// Chance under the model below which a fetch's new postings count as a surprise.
pub const SURPRISE: f64 = 0.01;

/// Share of the day's budget that raises between two rounds may add at most.
pub const QUICK_SHARE: f64 = 0.05;

/// What one feed is re-learned and re-solved with between rounds: the last round's
/// population and prices.
#[derive(Clone, Debug)]
pub struct Basis {
    /// What the round learned of the whole population.
    pub population: Population,
    /// The prices of a fetch the round's allocation settled at.
    pub prices: Prices,
    /// The round's planning settings (slots, period, metric).
    pub cfg: PlanConfig,
    /// The round's planned fetches per slot, when a per-slot capacity is set
    /// ([`crate::plan::crowd`]): the hub takes them when it installs the round and keeps
    /// them current as updates apply, to fit each update around.
    pub occupancy: Option<crate::plan::occupancy::Occupancy>,
}

/// `P(N ≥ k)` for `N` Poisson with mean `lambda`.
pub fn poisson_tail(k: usize, lambda: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if lambda.is_nan() || lambda <= 0.0 {
        return 0.0;
    }
    if lambda.is_infinite() {
        return 1.0;
    }
    // 1 − Σ_{j<k} e^{−λ} λ^j / j!, the terms built up in turn.
    let mut term = (-lambda).exp();
    let mut below = 0.0;
    for j in 0..k {
        below += term;
        term *= lambda / (j + 1) as f64;
    }
    (1.0 - below).max(0.0)
}

/// Postings `model` expects in `[from_ms, to_ms)`: its hourly rates (per day, 24 bins; a
/// weekly model's 168 bins from Thursday 1 January 1970, the epoch's weekday) summed over
/// the hours of the interval.
pub fn expected_between(model: &FeedModel, from_ms: i64, to_ms: i64) -> f64 {
    let bins = model.post_bins.len();
    if bins == 0 || to_ms <= from_ms {
        return 0.0;
    }
    let period_ms = if bins == 24 { DAY_MS } else { 7 * DAY_MS };
    let bin_ms = period_ms / bins as i64;
    let per_period: f64 = model.post_bins.iter().map(|&b| b as f64).sum();
    // Whole periods at once; the rest hour by hour.
    let whole = (to_ms - from_ms) / period_ms;
    let mut sum = whole as f64 * per_period;
    let mut t = from_ms + whole * period_ms;
    // A daily model's bins hold postings per day in that hour; a weekly one's per week.
    while t < to_ms {
        let b = (t.rem_euclid(period_ms) / bin_ms) as usize;
        let end = ((t.div_euclid(bin_ms) + 1) * bin_ms).min(to_ms);
        sum += model.post_bins[b.min(bins - 1)] as f64 * (end - t) as f64 / bin_ms as f64;
        t = end;
    }
    sum
}

/// Whether `found` new postings in `[from_ms, to_ms)` are a surprise under `model`.
pub fn surprised(model: &FeedModel, from_ms: i64, to_ms: i64, found: usize) -> bool {
    found > 0 && poisson_tail(found, expected_between(model, from_ms, to_ms)) < SURPRISE
}

/// One feed re-learned and re-solved.
#[derive(Clone, Debug)]
pub struct Update {
    /// Its new model.
    pub model: FeedModel,
    /// Its new plan.
    pub plan: FeedPlan,
    /// Its fetch offsets within a period, seconds.
    pub offsets_seconds: Vec<f64>,
    /// The period of its fetch times, seconds.
    pub period_seconds: f64,
    /// Fetches a day it adds (negative: frees) against its previous plan.
    pub change_per_day: f64,
}

/// Re-learns feed `id` from `state` against `basis` and re-solves it from its previous
/// `model` and `plan`. `None` where it cannot be updated between rounds (never watched, a
/// weekly model, an unpriced plan).
pub fn update(
    basis: &Basis,
    id: &str,
    model: &FeedModel,
    plan: &FeedPlan,
    state: &FeedState,
    now_ms: i64,
) -> Option<Update> {
    let pop = &basis.population;
    if pop.weekly || model.post_bins.len() != 24 {
        return None;
    }
    let price = basis.prices.for_host(model.host)?;
    let window_start = now_ms - (pop.window_days * DAY_MS as f64) as i64;
    let w = |t: i64| recency::weight(now_ms - t, pop.half_life_days);
    let t = tally(state, window_start, now_ms, &w, &pop.clump_hours)?;
    let hours = pop.hours(
        &t.counts,
        &t.exposure,
        t.span_days,
        true,
        pop.typical,
        &t.counts,
    );
    let new = FeedModel {
        post_bins: hours,
        ..model.clone()
    };
    let single = resolve_one(
        &new,
        &basis.cfg,
        price,
        plan.level,
        new.max_level,
        index_of(id),
    );
    let (offsets_seconds, period_seconds) =
        fetch_times(id, &single.plan, flat(&new, basis.cfg.metric), &basis.cfg);
    let days = basis.cfg.period_seconds / 86_400.0;
    Some(Update {
        change_per_day: rate_per_day(single.plan.level, days) - rate_per_day(plan.level, days),
        model: new,
        plan: single.plan,
        offsets_seconds,
        period_seconds,
    })
}

/// The first of `offsets_seconds` (within periods of `period_seconds` from the Unix epoch)
/// after `now_ms`: when a feed with these times is next fetched.
pub fn next_fetch_ms(offsets_seconds: &[f64], period_seconds: f64, now_ms: i64) -> Option<i64> {
    let period_ms = (period_seconds * 1000.0).round() as i64;
    if period_ms <= 0 {
        return None;
    }
    let start = now_ms.div_euclid(period_ms) * period_ms;
    offsets_seconds
        .iter()
        .filter(|o| o.is_finite())
        .map(|o| {
            let t = start + (o * 1000.0).round() as i64;
            if t > now_ms {
                t
            } else {
                t + period_ms
            }
        })
        .min()
}

fn rate_per_day(level: Level, days_per_period: f64) -> f64 {
    level_rate(level) / days_per_period
}

/// A stable stand-in for the feed's position in a round (which spreads a flat model's
/// times and a quiet feed's day in its cycle): FNV-1a of its id.
pub(crate) fn index_of(id: &str) -> usize {
    id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poisson_tail_matches_its_sum() {
        assert_eq!(poisson_tail(0, 3.0), 1.0);
        assert!((poisson_tail(1, 2.0) - (1.0 - (-2.0f64).exp())).abs() < 1e-15);
        // P(N ≥ 3), λ = 1: 1 − e^{-1}(1 + 1 + 1/2).
        let want = 1.0 - (-1.0f64).exp() * 2.5;
        assert!((poisson_tail(3, 1.0) - want).abs() < 1e-15);
        assert_eq!(poisson_tail(2, 0.0), 0.0);
        assert!(poisson_tail(50, 1.0) < 1e-40);
    }

    fn model(per_hour: f32) -> FeedModel {
        FeedModel {
            weight: 1.0,
            post_bins: vec![per_hour; 24],
            peaks: Vec::new(),
            access_bins: vec![0.0; 24],
            min_level: 1,
            max_level: 96,
            host: None,
            document: None,
        }
    }

    #[test]
    fn the_next_fetch_is_the_first_offset_after_now_in_this_period_or_the_next() {
        let day = DAY_MS;
        let offsets = [3_600.0, 43_200.0];
        // 05:00 on day 10: noon that day.
        assert_eq!(
            next_fetch_ms(&offsets, 86_400.0, 10 * day + 5 * 3_600_000),
            Some(10 * day + 43_200_000)
        );
        // 13:00: 01:00 the next day.
        assert_eq!(
            next_fetch_ms(&offsets, 86_400.0, 10 * day + 13 * 3_600_000),
            Some(11 * day + 3_600_000)
        );
        // Every three days, at an offset on the cycle's second day.
        assert_eq!(next_fetch_ms(&[90_000.0], 259_200.0, 0), Some(90_000_000));
        assert_eq!(next_fetch_ms(&[], 86_400.0, 0), None);
        assert_eq!(next_fetch_ms(&[1.0], 0.0, 0), None);
    }

    #[test]
    fn expected_postings_sum_the_hours_of_the_interval() {
        let mut m = model(0.0);
        m.post_bins[9] = 2.0;
        let hour = DAY_MS / 24;
        // Half of 09:00–10:00 on day 3.
        let t = 3 * DAY_MS + 9 * hour;
        assert!((expected_between(&m, t, t + hour / 2) - 1.0).abs() < 1e-12);
        // Ten whole days and the same half hour.
        let e = expected_between(&m, t, t + 10 * DAY_MS + hour / 2);
        assert!((e - 21.0).abs() < 1e-9, "{e}");
        assert_eq!(expected_between(&m, t, t), 0.0);
    }

    #[test]
    fn a_quiet_feed_waking_is_a_surprise_and_a_busy_feeds_usual_day_is_not() {
        let hour = DAY_MS / 24;
        // Once in 100 days: one posting in a day is a surprise.
        assert!(surprised(&model(0.01 / 24.0), 0, DAY_MS, 1));
        // Five a day: five in a day is not; twenty in two hours is.
        assert!(!surprised(&model(5.0 / 24.0), 0, DAY_MS, 5));
        assert!(surprised(&model(5.0 / 24.0), 0, 2 * hour, 20));
        assert!(!surprised(&model(5.0 / 24.0), 0, DAY_MS, 0));
    }
}
