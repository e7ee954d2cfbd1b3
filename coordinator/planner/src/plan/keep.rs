//! Which of a re-planned feed's previous times are kept.
//!
//! A replan re-solves the feeds whose model or level changed; a feed's new optimum can sit
//! far from its old times at almost the same cost (a quiet feed's curve is flat-ish), and
//! every move makes the worker fetch early. So a changed feed keeps its previous plan while
//! that costs at most [`KEEP_WITHIN`] more than the new optimum.

use super::alloc::{level_period_multiple, Level};
use super::exchange::CurvePoint;
use super::overflow::{prefix_sums, priced_loss};
use super::planner::{table_for, FeedModel, FeedPlan, PlanConfig, Scratch};

/// How much worse (relative, on the feed's new model) a re-planned feed's previous times may
/// be than its new optimum and still be kept. Replans follow every few reports while models
/// learn; the optimum of a quiet feed's flat-ish curve jumps between far-apart placements of
/// nearly equal cost, and every jump makes the worker fetch early (it keeps at least half a
/// gap between fetches, not a whole one): replayed with a replan every simulated minute, the
/// live system spent 8% over its budget, feeds planned at one or two fetches a day 22% over.
/// It must stay small: young models are shrunk toward the pooled pattern, so on them any
/// placement looks nearly as good as any other, and at 1% the first days kept the cold
/// start's placements (sample-500 replayed: day 0 at 236 min against 160 without keeping,
/// days 1-6 2.5% worse). At 0.1% the budget holds as well (4,002 fetches on days 1-2 at a
/// replan a minute, budget 4,000) and day 0 stays at 161 min.
pub(super) const KEEP_WITHIN: f64 = 0.001;

/// A dirty feed's previous plan, if it is at the same level and costs at most
/// [`KEEP_WITHIN`] more than `new` (the curve's optimum at `level`) rotated as far as
/// `jitter::WITHIN` allows, on the feed's current model.
pub(super) fn keep_previous(
    old: &FeedPlan,
    feed: &FeedModel,
    index: usize,
    level: Level,
    new: &CurvePoint,
    cfg: &PlanConfig,
    s: &mut Scratch,
) -> Option<FeedPlan> {
    if old.level != level
        || old.period_multiple != level_period_multiple(level)
        || old.slots.is_empty()
        || old.slots.iter().any(|&x| x as usize >= cfg.slots)
    {
        return None;
    }
    let table = table_for(feed, index, cfg, s);
    // Both priced at the days' prices: old times on a day grown dearer are not kept for
    // their metric alone.
    let priced = |slots: &[u32]| {
        feed.weight
            * if old.period_multiple > 1 {
                table.multi_period_cost(slots[0] as usize, old.period_multiple)
            } else {
                table.schedule_cost(slots)
            }
    };
    let cost = priced(&old.slots);
    let price = feed.weight * table.price_of(&old.slots, old.period_multiple);
    let new_cost = if table.is_priced() && !new.slots.is_empty() {
        priced(&new.slots) + (new.cost - new.delay)
    } else {
        new.cost
    };
    s.keep_table(table);
    let lost = feed.document.map_or(0.0, |doc| {
        priced_loss(&doc, level, &old.slots, &prefix_sums(&s.post))
    });
    // The new plan would be rotated within `jitter::WITHIN` of the optimum, so the old one
    // is held to the same bound before the keeping margin.
    let bound = new_cost * (1.0 + super::jitter::WITHIN) * (1.0 + KEEP_WITHIN);
    (cost + lost <= bound + 1e-12 * new_cost.abs().max(1.0)).then(|| FeedPlan {
        expected_cost: (cost - price).max(0.0),
        ..old.clone()
    })
}
