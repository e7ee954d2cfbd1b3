//! Reader access rates the live plan learns from, from a cold start on.
//!
//! The reader metrics (`miss`, `access-delay`) price a fetch by the accesses it serves. Right
//! after start, or for a feed whose readers have not been seen yet, the observed access
//! histograms are empty, every fetch looks worthless, and the allocation would fall to its
//! floor. So each feed's access rate is shrunk toward a prior, the way posting rates are:
//!
//! `rate_b = (observed_b + β · w · pooled_b) / (days + β)`
//!
//! with `observed_b` the weighted accesses its subscribers made in hour `b` over the `days`
//! of statistics, `w` the feed's summed subscriber weight, `pooled_b` the accesses per unit
//! of subscriber weight per day seen over all feeds (flat, one a day, before any is seen),
//! and `β` pseudo-days. Early on the prior dominates: with one flat pattern for every reader
//! the reader metric ranks fetches the way posting delay does (weighted by readership); as
//! days of statistics accumulate each feed's own readers take over. A feed nobody subscribes
//! to has no readers and no value under these metrics, unless no feed has subscribers at
//! all: then every feed counts as read by one reader, so the plan still spends its budget.

/// Hourly bins per day.
const BINS: usize = 24;

/// One feed's reader observations.
#[derive(Clone, Debug)]
pub struct FeedAccess {
    /// Weighted accesses its subscribers made, per hourly bin, over the statistics' span.
    pub observed: Vec<f32>,
    /// Summed weight of its subscribers.
    pub subscriber_weight: f64,
}

/// Access rates per hourly bin per day, one vector per feed in `feeds` order.
///
/// `exposure[b]`: days the statistics have watched hour `b` (an hour not watched yet says
/// nothing about readers, and is not read as one nobody reads in); `pseudo_days`: `β`.
pub fn access_rates(
    feeds: &[FeedAccess],
    exposure: &[f64; BINS],
    pseudo_days: f64,
) -> Vec<Vec<f32>> {
    let beta = pseudo_days.max(0.0);
    let nobody_subscribes = feeds.iter().all(|f| f.subscriber_weight <= 0.0);
    let weight = |f: &FeedAccess| {
        if nobody_subscribes {
            1.0
        } else {
            f.subscriber_weight.max(0.0)
        }
    };
    let mut counts = [0.0f64; BINS];
    let mut total_weight = 0.0;
    for f in feeds {
        for (p, &o) in counts.iter_mut().zip(&f.observed) {
            *p += o as f64;
        }
        total_weight += weight(f);
    }
    // Accesses per unit of reader weight per day, in the hours watched so far; the others
    // take the mean of the watched ones.
    let per_hour: Vec<Option<f64>> = (0..BINS)
        .map(|b| {
            (exposure[b] > 0.0 && total_weight > 0.0)
                .then(|| counts[b] / total_weight / exposure[b])
        })
        .collect();
    let watched: Vec<f64> = per_hour.iter().flatten().copied().collect();
    let seen: f64 = counts.iter().sum();
    let pooled: Vec<f64> = if seen > 0.0 && !watched.is_empty() {
        let fill = watched.iter().sum::<f64>() / watched.len() as f64;
        per_hour.iter().map(|v| v.unwrap_or(fill)).collect()
    } else {
        vec![1.0 / BINS as f64; BINS]
    };
    feeds
        .iter()
        .map(|f| {
            let w = weight(f);
            (0..BINS)
                .map(|b| {
                    let o = f.observed.get(b).copied().unwrap_or(0.0) as f64;
                    let days = exposure[b].max(0.0);
                    let denominator = days + beta;
                    if denominator > 0.0 {
                        ((o + beta * w * pooled[b]) / denominator) as f32
                    } else {
                        (w * pooled[b]) as f32
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(observed: Vec<f32>, w: f64) -> FeedAccess {
        FeedAccess {
            observed,
            subscriber_weight: w,
        }
    }

    #[test]
    fn cold_start_leans_on_the_prior_and_moves_to_the_readers() {
        let evening: Vec<f32> = (0..BINS)
            .map(|b| if b == 20 { 10.0 } else { 0.0 })
            .collect();
        // Nothing seen yet: flat, proportional to readership, never zero for a read feed.
        let r = access_rates(
            &[feed(vec![0.0; BINS], 2.0), feed(vec![0.0; BINS], 1.0)],
            &[0.1; BINS],
            1.0,
        );
        assert!(r[0].iter().all(|&v| v > 0.0));
        assert!((r[0][3] / r[1][3] - 2.0).abs() < 1e-6);
        assert!((r[0][3] - r[0][20]).abs() < 1e-9, "flat before any access");
        // A feed whose readers read at 20:00 every day for 30 days: its own pattern wins.
        let r = access_rates(
            &[feed(evening.iter().map(|v| v * 30.0).collect(), 1.0)],
            &[30.0; BINS],
            1.0,
        );
        let at20 = r[0][20] as f64;
        assert!((at20 - 310.0 / 31.0).abs() < 1e-3, "{at20}");
        assert!(r[0][3] < 1e-6);
        // Half a day of statistics: the prior still carries most of the weight.
        let r = access_rates(
            &[feed(evening.clone(), 1.0), feed(vec![0.0; BINS], 1.0)],
            &[0.5; BINS],
            1.0,
        );
        assert!(
            r[1][20] > 0.0,
            "an unread feed with readers leans on the pooled pattern"
        );
        assert!(
            r[1][20] > r[1][3],
            "the pooled pattern is the readers' evening"
        );
    }

    #[test]
    fn hours_not_yet_watched_are_not_read_as_unread() {
        // Six hours watched (12:00-18:00), readers active in them; the night is unknown.
        let mut exposure = [0.0; BINS];
        let mut seen = vec![0.0f32; BINS];
        for b in 12..18 {
            exposure[b] = 0.25;
            seen[b] = 3.0;
        }
        let r = access_rates(&[feed(seen, 1.0)], &exposure, 1.0);
        assert!(
            r[0][3] > 0.5 * r[0][14],
            "unwatched hours get the watched mean: {:?}",
            r[0]
        );
    }

    #[test]
    fn unsubscribed_feeds_have_no_readers_unless_nobody_subscribes() {
        let r = access_rates(
            &[feed(vec![0.0; BINS], 1.0), feed(vec![0.0; BINS], 0.0)],
            &[2.0; BINS],
            1.0,
        );
        assert!(r[0].iter().all(|&v| v > 0.0));
        assert!(r[1].iter().all(|&v| v == 0.0));
        let r = access_rates(
            &[feed(vec![0.0; BINS], 0.0), feed(vec![0.0; BINS], 0.0)],
            &[2.0; BINS],
            1.0,
        );
        assert!(r.iter().all(|f| f.iter().all(|&v| v > 0.0)));
    }
}
