//! How well the live plans' promises match what they delivered, day by day, in `replay`.
//!
//! A day's realized delay is an average over the postings that came that day, and on real
//! feeds those come in bursts: thirty commits pushed in a minute are found by one fetch and
//! share one delay. So a day's figure carries sampling noise of its own, which the plan
//! cannot remove however good its model. This module states the plans' promise for the
//! postings that came ([`DayCalibration::expected_min`]) and the spread a day of those
//! postings has around it ([`DayCalibration::se_min`]: a cluster-robust standard error whose
//! clusters are the postings one fetch found together or that were published at the same
//! instant, as one landing shows in several directories' commit feeds), so a day outside
//! 15% can be told apart as a miss of the model or as a day of few independent draws.

/// The plans' promise for one scored day and its sampling spread.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DayCalibration {
    /// Each of the day's postings counted at its feed's expected delay per posting under
    /// the plan in force when it was published (minutes), averaged.
    pub expected_min: f64,
    /// Standard error of the day's realized average delay around that promise, clustered
    /// into independent draws (postings one fetch found, or published at the same
    /// instant; minutes); NaN with fewer than two clusters.
    pub se_min: f64,
    /// The independent draws among the day's found postings.
    pub clusters: usize,
}

impl DayCalibration {
    /// Whether the realized figure is within `share` of the promise or within two
    /// standard errors of it (what a calibrated plan would show on nineteen days of
    /// twenty).
    pub fn consistent(&self, realized_min: f64, share: f64) -> bool {
        let gap = (realized_min - self.expected_min).abs();
        gap <= share * self.expected_min || (self.se_min.is_finite() && gap <= 2.0 * self.se_min)
    }
}

/// The calibration of the postings published in `[s, e)` (trace seconds): `by_replan` is
/// each replan's time (ms from the trace start) and per-feed expected delay per posting
/// (seconds), `fetches` each feed's fetch times (seconds). None without a planned feed
/// among the day's postings.
pub fn day_calibration(
    postings: &[Vec<f64>],
    by_replan: &[(i64, Vec<f64>)],
    fetches: &[Vec<f64>],
    s: f64,
    e: f64,
) -> Option<DayCalibration> {
    let (mut sum, mut n) = (0.0, 0usize);
    // The found postings: residual (realized − promised), and what ties them to others.
    let mut found_posts: Vec<(f64, (usize, u64), u64)> = Vec::new();
    for (f, times) in postings.iter().enumerate() {
        let log = fetches.get(f).map_or(&[][..], |l| l.as_slice());
        for &t in times.iter().filter(|&&t| t >= s && t < e) {
            let Some(expected) = promise_at(by_replan, f, t) else {
                continue;
            };
            sum += expected;
            n += 1;
            if let Some(found) = found_by(log, t) {
                found_posts.push(((found - t) - expected, (f, found.to_bits()), t.to_bits()));
            }
        }
    }
    if n == 0 {
        return None;
    }
    let (sums, clusters) = cluster_sums(&found_posts);
    // The spread a calibrated plan gives the day's mean gap: under calibration each
    // residual has mean zero, so the clusters' residual sums are not centred (centring on
    // the day's own mean gap would take a burst day's one big draw for the truth).
    let se_min = if clusters >= 2 {
        let var: f64 = sums.iter().map(|r| r * r).sum();
        var.sqrt() / found_posts.len() as f64 / 60.0
    } else {
        f64::NAN
    };
    Some(DayCalibration {
        expected_min: sum / n as f64 / 60.0,
        se_min,
        clusters,
    })
}

/// Residual sums of the independent draws among `posts` (residual, finding fetch, published
/// time), and how many there are. Postings are one draw when one fetch found them (a burst
/// in one document) or when they were published at the same instant (one event seen by
/// several feeds: a change landing in several directories' commit feeds of a repository),
/// and transitively so.
fn cluster_sums(posts: &[(f64, (usize, u64), u64)]) -> (Vec<f64>, usize) {
    use std::collections::HashMap;
    let mut parent: Vec<usize> = (0..posts.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let (mut by_fetch, mut by_time) = (HashMap::new(), HashMap::new());
    for (i, &(_, fetch, time)) in posts.iter().enumerate() {
        for j in [
            *by_fetch.entry(fetch).or_insert(i),
            *by_time.entry(time).or_insert(i),
        ] {
            let (a, b) = (root(&mut parent, i), root(&mut parent, j));
            parent[a] = b;
        }
    }
    let mut sums: HashMap<usize, f64> = HashMap::new();
    for (i, &(r, _, _)) in posts.iter().enumerate() {
        *sums.entry(root(&mut parent, i)).or_default() += r;
    }
    let count = sums.len();
    (sums.into_values().collect(), count)
}

/// The first fetch of `log` at or after `t`, which found a posting published at `t` (as
/// `replay_log` counts).
fn found_by(log: &[f64], t: f64) -> Option<f64> {
    log.get(log.partition_point(|&x| x < t)).copied()
}

/// The plan in force at `t` (trace seconds): its promise for feed `f`, if it planned it.
fn promise_at(by_replan: &[(i64, Vec<f64>)], f: usize, t: f64) -> Option<f64> {
    let k = by_replan.partition_point(|(at, _)| *at as f64 <= t * 1000.0);
    k.checked_sub(1)
        .and_then(|k| by_replan[k].1.get(f).copied())
        .filter(|x| x.is_finite())
}

/// Writes every posting of the trace as `feed_id,published,found,promised` (seconds; found
/// empty when no fetch found it, promised empty when no plan covered its feed).
pub fn write_promises(
    path: &std::path::Path,
    trace: &kairos_coordinator::trace::Trace,
    by_replan: &[(i64, Vec<f64>)],
    fetches: &[Vec<f64>],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "feed_id,published,found,promised")?;
    for (f, times) in trace.postings.iter().enumerate() {
        let log = fetches.get(f).map_or(&[][..], |l| l.as_slice());
        for &t in times {
            let found = found_by(log, t);
            let promised = promise_at(by_replan, f, t);
            writeln!(
                w,
                "{},{t:.1},{},{}",
                trace.feeds[f].id,
                found.map_or(String::new(), |x| format!("{x:.1}")),
                promised.map_or(String::new(), |x| format!("{x:.1}"))
            )?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: f64 = 86_400.0;

    #[test]
    fn each_posting_counts_at_its_feed_promise_under_the_plan_in_force() {
        // Day 0: three postings of the busy feed, one of the quiet one (one before the
        // second plan, one after), one of an unplanned feed.
        let postings = vec![vec![100.0, 200.0, 50_000.0], vec![60_000.0], vec![300.0]];
        // Plans at 0 and at 40,000 s: the busy feed promised 600 s then 1,200 s a posting,
        // the quiet one 6,000 s then 12,000 s; the third is never planned.
        let plans = vec![
            (0, vec![600.0, 6_000.0, f64::NAN]),
            (40_000_000, vec![1_200.0, 12_000.0, f64::NAN]),
        ];
        let fetches = vec![vec![700.0, 51_000.0], vec![70_000.0], vec![400.0]];
        let got = day_calibration(&postings, &plans, &fetches, 0.0, DAY).unwrap();
        let want = (600.0 + 600.0 + 1_200.0 + 12_000.0) / 4.0 / 60.0;
        assert!(
            (got.expected_min - want).abs() < 1e-9,
            "{got:?} against {want}"
        );
        // Three fetches found the planned postings: 700 (two), 51,000 and 70,000.
        assert_eq!(got.clusters, 3);
        assert_eq!(
            day_calibration(&postings, &plans, &fetches, DAY, 2.0 * DAY),
            None
        );
    }

    #[test]
    fn the_spread_counts_a_burst_as_one_draw() {
        // Twenty feeds promised 600 s each. Spread: each posts once, found 0 or 1,200 s
        // later, half each. Burst: one feed posts twenty times in a minute and a single
        // fetch 1,200 s later finds them all, beside one other feed found at once.
        let plans = vec![(0, vec![600.0; 20])];
        let spread_posts: Vec<Vec<f64>> = (0..20).map(|f| vec![1_000.0 * f as f64]).collect();
        let spread_fetch: Vec<Vec<f64>> = (0..20)
            .map(|f| vec![1_000.0 * f as f64 + if f % 2 == 0 { 0.0 } else { 1_200.0 }])
            .collect();
        let spread = day_calibration(&spread_posts, &plans, &spread_fetch, 0.0, DAY).unwrap();
        // Residuals ±600 s, one per fetch: sqrt(20 × 600²)/20 s.
        let want = (20.0f64 * 600.0 * 600.0).sqrt() / 20.0 / 60.0;
        assert!((spread.se_min - want).abs() < 1e-9, "{spread:?}");
        assert_eq!(spread.clusters, 20);

        let mut burst_posts = vec![Vec::new(); 20];
        burst_posts[0] = (0..20).map(|i| 3.0 * i as f64).collect();
        burst_posts[1] = vec![5_000.0];
        let mut burst_fetch = vec![Vec::new(); 20];
        burst_fetch[0] = vec![1_260.0];
        burst_fetch[1] = vec![5_000.0];
        let burst = day_calibration(&burst_posts, &plans, &burst_fetch, 0.0, DAY).unwrap();
        assert_eq!(burst.clusters, 2);
        // Twenty-one postings but two draws: the spread is far wider than twenty-one
        // independent postings with the same residuals would have.
        let residuals: Vec<f64> = burst_posts[0]
            .iter()
            .map(|t| 1_260.0 - t - 600.0)
            .chain([-600.0])
            .collect();
        let independent = residuals.iter().map(|r| r * r).sum::<f64>().sqrt() / 21.0 / 60.0;
        assert!(burst.se_min > 3.0 * independent, "{burst:?} {independent}");
        // Realized 1,200-ish s against a 600 s promise: outside 15%, inside two errors.
        let realized = residuals.iter().map(|r| r + 600.0).sum::<f64>() / 21.0 / 60.0;
        assert!((realized - 10.0).abs() / 10.0 > 0.15);
        assert!(burst.consistent(realized, 0.15));
        assert!(!spread.consistent(realized * 3.0, 0.15));
    }

    #[test]
    fn one_event_in_several_feeds_is_one_draw() {
        // Ten directory feeds of one repository all show one landing at 1,000 s; each is
        // found by its own fetch. Two other feeds post at other instants.
        let plans = vec![(0, vec![600.0; 12])];
        let mut posts: Vec<Vec<f64>> = vec![vec![1_000.0]; 10];
        posts.push(vec![2_000.0]);
        posts.push(vec![3_000.0]);
        let fetches: Vec<Vec<f64>> = (0..12).map(|f| vec![5_000.0 + f as f64]).collect();
        let c = day_calibration(&posts, &plans, &fetches, 0.0, DAY).unwrap();
        assert_eq!(c.clusters, 3);
        // The landing's ten residuals add before squaring.
        let r = |t: f64, f: f64| 5_000.0 + f - t - 600.0;
        let landing: f64 = (0..10).map(|f| r(1_000.0, f as f64)).sum();
        let want = (landing.powi(2) + r(2_000.0, 10.0).powi(2) + r(3_000.0, 11.0).powi(2)).sqrt()
            / 12.0
            / 60.0;
        assert!((c.se_min - want).abs() < 1e-9, "{c:?} against {want}");
    }
}
