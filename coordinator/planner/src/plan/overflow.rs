//! Postings that scroll off a feed's document between two fetches, priced into the plan.
//!
//! A feed's document (its RSS or Atom file) holds its newest `C` items. When more than `C`
//! postings land between two fetches, the oldest of them are never seen: no later fetch
//! shows them. The `delay` metric counts such a posting as seen at the next fetch, so under
//! it alone fewer fetches only ever cost the wait. A [`Document`] on a feed's model adds the
//! expected number lost, times a stated cost per lost posting, to that feed's cost curve,
//! and the allocation then trades lost postings against delay on one scale: a busy feed
//! with a small document gets the fetches that keep it from overflowing where they are
//! worth more than they save elsewhere, and not where they are not.
//!
//! The count in a gap of expected mass `μ` is modelled as clumps: `K ~ Poisson(μ / s)`
//! clumps of `s` postings each (`s = 1`: postings one by one, a Poisson count). The expected
//! loss is `s · E[(K − C/s)⁺]`. Clumps put the same mean in fewer, larger lumps, so the tail
//! past the document is heavier than a Poisson count's of the same mean.

use super::alloc::{level_period_multiple, Level};

/// A feed's document, for pricing postings that scroll off it unseen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Document {
    /// Items the document holds (at least 1).
    pub items: f64,
    /// Mean postings per clump (1: postings arrive one at a time).
    pub clump: f64,
    /// Cost of one lost posting, in the units of the feed's weighted cost per period.
    pub lost_cost: f64,
}

/// `E[(K − c)⁺]` for `K ~ Poisson(m)` and a real threshold `c ≥ 0`.
///
/// `E[(K − c)⁺] = m − c + Σ_{k ≤ c} (c − k) P(K = k)`: the sum has `⌊c⌋ + 1` terms, and the
/// probabilities are built by the recurrence `P(k) = P(k − 1) · m / k` from `e^{−m}`. Where
/// `e^{−m}` underflows (`m` above ~700) the terms are summed in logarithms.
pub fn poisson_excess(m: f64, c: f64) -> f64 {
    if m.is_nan() || m <= 0.0 || !m.is_finite() || c.is_nan() {
        return 0.0;
    }
    let c = c.max(0.0);
    // Far below the mean: every unit of the threshold is passed; the correction is nil.
    if c < m - 40.0 * m.sqrt() {
        return m - c;
    }
    let top = c.floor() as u64;
    let ln_m = m.ln();
    let mut ln_p = -m;
    let mut below = 0.0;
    for k in 0..=top {
        if k > 0 {
            ln_p += ln_m - (k as f64).ln();
        }
        below += (c - k as f64) * ln_p.exp();
    }
    (m - c + below).max(0.0)
}

/// Expected postings lost in one gap of expected mass `mass` (postings), under `doc`.
pub fn gap_loss(mass: f64, doc: &Document) -> f64 {
    let items = doc.items.max(1.0);
    // Far below the document's size nothing is lost: a Poisson count at a quarter of its
    // threshold passes it with a chance under 1e-6 from a threshold of 20 on; the sum
    // is skipped there (most gaps of most feeds).
    let s = doc.clump.max(1.0);
    let (m, c) = (mass / s, items / s);
    if m.is_nan() || m <= 0.0 || (c >= 20.0 && m < c / 4.0) {
        return 0.0;
    }
    s * poisson_excess(m, c)
}

/// Expected postings lost per period by a schedule with fetch boundaries `slots` (one
/// period, cyclic), from `prefix` sums of the per-slot posting mass.
pub fn schedule_loss(slots: &[u32], prefix: &[f64], doc: &Document) -> f64 {
    let n = prefix.len().saturating_sub(1);
    if n == 0 {
        return 0.0;
    }
    let total = prefix[n];
    if slots.is_empty() {
        return 0.0;
    }
    let mut sorted: Vec<usize> = slots.iter().map(|&x| (x as usize).min(n)).collect();
    sorted.sort_unstable();
    let mut lost = 0.0;
    for w in sorted.windows(2) {
        lost += gap_loss(prefix[w[1]] - prefix[w[0]], doc);
    }
    let (first, last) = (sorted[0], sorted[sorted.len() - 1]);
    lost + gap_loss(total - prefix[last] + prefix[first], doc)
}

/// Expected postings lost per period by one fetch every `k` periods (one gap of `k`
/// periods' mass `k · per_period`).
pub fn multi_period_loss(per_period: f64, k: u32, doc: &Document) -> f64 {
    let k = f64::from(k.max(1));
    gap_loss(k * per_period, doc) / k
}

/// Prefix sums of per-slot posting mass (`prefix[i]` = mass of slots `0..i`).
pub(super) fn prefix_sums(post: &[f64]) -> Vec<f64> {
    let mut prefix = Vec::with_capacity(post.len() + 1);
    prefix.push(0.0);
    for &x in post {
        prefix.push(prefix[prefix.len() - 1] + x);
    }
    prefix
}

/// The priced postings a feed is expected to lose per period at level `l` with fetch
/// boundaries `slots` (one slot for a sub-period level).
pub(super) fn priced_loss(doc: &Document, l: Level, slots: &[u32], prefix: &[f64]) -> f64 {
    if doc.lost_cost.is_nan() || doc.lost_cost <= 0.0 {
        return 0.0;
    }
    let lost = if l >= 1 {
        schedule_loss(slots, prefix, doc)
    } else {
        multi_period_loss(prefix[prefix.len() - 1], level_period_multiple(l), doc)
    };
    doc.lost_cost * lost
}

/// `E[(K − c)⁺]` for `K ~ Poisson(m)` by summing the tail directly, far past the mean: the
/// tests' reference for [`poisson_excess`].
#[cfg(test)]
pub(super) fn by_tail(m: f64, c: f64) -> f64 {
    let mut p = (-m).exp();
    let mut sum = 0.0;
    for k in 0..3000u32 {
        if k > 0 {
            p *= m / k as f64;
        }
        if k as f64 > c {
            sum += (k as f64 - c) * p;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::by_tail;

    #[test]
    fn the_excess_matches_the_tail_summed_directly() {
        for &m in &[0.01, 0.5, 3.0, 10.0, 20.0, 35.0, 120.0] {
            for &c in &[0.0, 0.5, 1.0, 4.0, 10.0, 14.0, 20.0, 27.5, 100.0] {
                let (got, want) = (poisson_excess(m, c), by_tail(m, c));
                assert!(
                    (got - want).abs() <= 1e-9 * (1.0 + want),
                    "m={m} c={c}: {got} vs {want}"
                );
            }
        }
        // With no threshold every posting is over it.
        assert!((poisson_excess(7.0, 0.0) - 7.0).abs() < 1e-12);
        // Large means (e^{-m} underflows) stay finite and near m − c.
        let big = poisson_excess(5000.0, 20.0);
        assert!((big - 4980.0).abs() < 1e-6, "{big}");
        let near = poisson_excess(900.0, 900.0);
        // E[(K − m)⁺] ≈ √(m / 2π) for large m.
        assert!(
            (near - (900.0f64 / std::f64::consts::TAU).sqrt()).abs() < 0.1,
            "{near}"
        );
    }

    #[test]
    fn bad_inputs_lose_nothing_and_never_panic() {
        assert_eq!(poisson_excess(0.0, 3.0), 0.0);
        assert_eq!(poisson_excess(f64::NAN, 3.0), 0.0);
        assert_eq!(poisson_excess(f64::INFINITY, 3.0), 0.0);
        assert_eq!(poisson_excess(2.0, f64::NAN), 0.0);
        let doc = Document {
            items: 0.0,
            clump: f64::NAN,
            lost_cost: 1.0,
        };
        assert!(gap_loss(3.0, &doc).is_finite());
        assert_eq!(schedule_loss(&[], &[0.0, 1.0], &doc), 0.0);
        assert_eq!(schedule_loss(&[0], &[0.0], &doc), 0.0);
    }

    #[test]
    fn a_clumped_feed_loses_more_than_a_poisson_one_of_the_same_mean() {
        let one = Document {
            items: 20.0,
            clump: 1.0,
            lost_cost: 1.0,
        };
        let clumped = Document { clump: 4.0, ..one };
        for &mass in &[10.0, 15.0, 20.0, 30.0] {
            assert!(gap_loss(mass, &clumped) > gap_loss(mass, &one), "{mass}");
        }
        // Mean 10 in a document of 20: a Poisson count passes it rarely.
        assert!(gap_loss(10.0, &one) < 0.01);
        // Clumps of 4: K ~ Poisson(2.5) past 5, times 4, summed directly.
        assert!((gap_loss(10.0, &clumped) - 4.0 * by_tail(2.5, 5.0)).abs() < 1e-12);
    }

    #[test]
    fn a_schedules_loss_is_its_gaps_losses_and_falls_with_more_fetches() {
        // 24 slots, 2 postings per slot: 48 a period, a 20-item document.
        let prefix: Vec<f64> = (0..=24).map(|i| 2.0 * i as f64).collect();
        let doc = Document {
            items: 20.0,
            clump: 1.0,
            lost_cost: 1.0,
        };
        let two = schedule_loss(&[0, 12], &prefix, &doc);
        assert!((two - 2.0 * by_tail(24.0, 20.0)).abs() < 1e-9, "{two}");
        // Uneven gaps (4 and 20 slots: masses 8 and 40) lose more than even ones.
        let uneven = schedule_loss(&[0, 4], &prefix, &doc);
        assert!((uneven - by_tail(8.0, 20.0) - by_tail(40.0, 20.0)).abs() < 1e-9);
        assert!(uneven > two);
        let four = schedule_loss(&[0, 6, 12, 18], &prefix, &doc);
        assert!(four < two);
        // One fetch every 3 periods of 8 postings: one gap of 24, a third of it per period.
        let per = multi_period_loss(8.0, 3, &doc);
        assert!((per - by_tail(24.0, 20.0) / 3.0).abs() < 1e-9);
    }
}
