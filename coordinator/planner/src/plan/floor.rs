//! The document floor: the fewest fetches a period whose optimal schedule leaves no gap
//! between two fetches fuller than a share of the feed's document, so postings do not scroll
//! off unseen. The other answer to the same loss is to price it ([`super::overflow`]); the
//! floor is what `replay`'s references and a model's clump floor use.

use super::alloc::{ceil_level, Level};
use super::overflow::prefix_sums;
use super::planner::{table_for, FeedModel, PlanConfig, Scratch};

/// The lowest level whose optimal schedule leaves no gap between two fetches in which the
/// feed is expected to post more than `items` postings (the share of its document the
/// postings of one gap may fill), so postings do not scroll off unseen. The optimal
/// schedule spaces fetches unevenly (close together where postings arrive under `delay`,
/// before readers read under the reader metrics), so the check is made on the schedule
/// the planner would use, not on even spacing: under `delay` the optimum often holds the
/// document already, and no fetch is added. Levels of one fetch per `k` periods leave gaps
/// of `k` periods. At most [`DOCUMENT_SEARCH_STEPS`] schedules are solved per feed, and
/// only for feeds posting more than `items` a period. With `placed` false (a model too
/// young for its hours to be trusted) the mean rate's level is used: the peak of a model
/// learned from one document is noise, and floors at it took the budget from read feeds
/// (`replay` of sample-500 under `access-delay`: day 0 at 2.8× uniform polling, against
/// 0.35× this way).
pub fn document_level(feed: &FeedModel, cfg: &PlanConfig, items: f64, placed: bool) -> Level {
    let per_period: f64 = feed.post_bins.iter().map(|&b| b as f64).sum();
    if items.is_nan() || items <= 0.0 || per_period.is_nan() || per_period <= 0.0 {
        return Level::MIN / 2;
    }
    if per_period <= items {
        return ceil_level(per_period / items);
    }
    let n = cfg.slots;
    let cap = feed.max_level.clamp(1, n as Level);
    // A gap holds at least the mean, so fewer fetches than this cannot do; evenly spaced
    // fetches at the busiest hour's rate always do (the peak rate for a whole gap).
    let lo = ((per_period / items).ceil() as Level).clamp(1, cap);
    let peak = feed.post_bins.iter().fold(0.0f64, |m, &b| m.max(b as f64));
    let even = ((peak * feed.post_bins.len() as f64 / items).ceil() as Level).clamp(lo, cap);
    if !placed {
        return lo;
    }
    let mut s = Scratch::default();
    let table = table_for(feed, 0, cfg, &mut s);
    // No schedule splits a slot. Where one slot alone holds more than `items` (a feed on a
    // timer whose window brings a batch), no level holds, and the search would end at the
    // top of its range, spending fetches that save nothing (137 a day for 40 postings at
    // 09:00 and a 10-item document). The floor is then what the busiest slot allows: as
    // many fetches as the period holds slots that full. The losses left are priced where
    // lost postings are (the default), and shown by the plan's expected losses either way.
    let busiest = s.post.iter().fold(0.0f64, |m, &x| m.max(x));
    if busiest > items {
        return ((per_period / busiest).ceil() as Level).clamp(1, cap);
    }
    let prefix = prefix_sums(&s.post);
    let mut holds = |level: Level| -> bool {
        let slots = s.solver.solve(&table, level as usize).slots;
        widest_gap(&slots, &prefix) <= items
    };
    // Binary search on [lo, even]: more fetches shrink the widest gap, not strictly, but
    // close enough. If even the top of the range does not hold under its optimal
    // placement, the top is used: the margin between `items` and the whole document takes
    // the rest.
    let (mut a, mut b) = (lo, even);
    let mut steps = 0;
    while a < b && steps < DOCUMENT_SEARCH_STEPS {
        let mid = a + (b - a) / 2;
        if holds(mid) {
            b = mid;
        } else {
            a = mid + 1;
        }
        steps += 1;
    }
    b
}

/// Schedules solved per feed by [`document_level`] at most.
pub const DOCUMENT_SEARCH_STEPS: usize = 12;

/// The most postings expected between two consecutive fetches at `slots` (boundaries, one
/// period, cyclic), from `prefix` sums of the per-slot posting mass.
fn widest_gap(slots: &[u32], prefix: &[f64]) -> f64 {
    let n = prefix.len() - 1;
    let total = prefix[n];
    if slots.is_empty() {
        return total;
    }
    let mut sorted: Vec<usize> = slots.iter().map(|&x| (x as usize).min(n)).collect();
    sorted.sort_unstable();
    let mut worst = 0.0f64;
    for w in sorted.windows(2) {
        worst = worst.max(prefix[w[1]] - prefix[w[0]]);
    }
    let (first, last) = (sorted[0], sorted[sorted.len() - 1]);
    worst.max(total - prefix[last] + prefix[first])
}
