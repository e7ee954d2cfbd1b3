//! Choosing the smoothing and the shrinkage (`--smoothing auto`, `--shrinkage auto`) on
//! held-out days, on a sample of the feeds.
//!
//! Each candidate is learned on the training window minus its last quarter, planned with the
//! optimal policy, and scored by the realized objective on that quarter. Scoring every
//! candidate on every feed made `auto` cost eight full plans (25 s of a 10k-feed plan on two
//! cores). The choice is one pair for the whole trace, and the paired comparison of candidates
//! on the same postings is steady long before every feed is in it, so each candidate is
//! planned on a fixed pseudo-random sample of `max(1,000, feeds / candidates)` feeds with the
//! budget scaled to the sample's share; the tuning then costs about one full plan. Reader
//! metrics are scored on a sample of the users (same rule) reading those feeds.

use crate::learn::{learn, LearnConfig};
use crate::plan::cost::Metric;
use crate::plan::pattern::Smoothing;
use crate::plan::planner::{solve, PlanConfig};
use crate::simulate::FeedSchedule;
use crate::trace::Trace;
use rayon::prelude::*;

/// Candidate shrinkage strengths (pseudo-postings).
pub const SHRINKAGE_GRID: [f64; 4] = [0.0, 2.0, 8.0, 32.0];

/// Candidate smoothings.
pub const SMOOTHING_GRID: [Smoothing; 2] = [Smoothing::Step, Smoothing::Linear];

/// Feeds (and users) every candidate is scored on, at least: all of them below this.
pub const MIN_SAMPLE: usize = 1_000;

/// One candidate of the held-out tuning.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TuneRow {
    /// Smoothing tried.
    pub smoothing: Smoothing,
    /// Shrinkage tried.
    pub shrinkage: f64,
    /// Realized objective on the held-out days, on the sample (delay: minutes per posting;
    /// miss: missed postings per access; access-delay: minutes per access).
    pub realized: f64,
}

/// The result of a tuning: the best pair, every candidate's score, and the sample's size.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// Best smoothing.
    pub smoothing: Smoothing,
    /// Best shrinkage.
    pub shrinkage: f64,
    /// Every candidate, in grid order.
    pub rows: Vec<TuneRow>,
    /// Feeds scored.
    pub sample_feeds: usize,
}

/// `count` of `0..n` in ascending order, chosen by a fixed hash (the same every run).
fn sample(n: usize, count: usize) -> Vec<usize> {
    if count >= n {
        return (0..n).collect();
    }
    let mut keyed: Vec<(u64, usize)> = (0..n)
        .map(|i| (xxhash_rust::xxh3::xxh3_64(&(i as u64).to_le_bytes()), i))
        .collect();
    keyed.select_nth_unstable(count - 1);
    let mut out: Vec<usize> = keyed[..count].iter().map(|&(_, i)| i).collect();
    out.sort_unstable();
    out
}

/// Sample size for `n` items and `candidates` candidates.
fn sample_size(n: usize, candidates: usize) -> usize {
    n.min(MIN_SAMPLE.max(n.div_ceil(candidates.max(1))))
}

/// Chooses among `smoothings × shrinkages` by the realized objective on the last quarter of
/// the training window (at least one period), planning on the rest with `plan_cfg` and
/// `budget_for(feeds)` scaled to the sample.
pub fn tune(
    trace: &Trace,
    learn_cfg: &LearnConfig,
    plan_cfg: &PlanConfig,
    budget_for: &dyn Fn(usize) -> f64,
    smoothings: &[Smoothing],
    shrinkages: &[f64],
) -> Tuned {
    let candidates = smoothings.len() * shrinkages.len();
    let feeds = sample_size(trace.feeds.len(), candidates);
    let users = sample_size(trace.users.len(), candidates);
    tune_on(
        trace,
        learn_cfg,
        plan_cfg,
        budget_for,
        (smoothings, shrinkages),
        (feeds, users),
    )
}

/// [`tune`] on `sizes.0` feeds and `sizes.1` users.
fn tune_on(
    trace: &Trace,
    learn_cfg: &LearnConfig,
    plan_cfg: &PlanConfig,
    budget_for: &dyn Fn(usize) -> f64,
    (smoothings, shrinkages): (&[Smoothing], &[f64]),
    sizes: (usize, usize),
) -> Tuned {
    let period = learn_cfg.period_seconds;
    let periods = ((learn_cfg.train_end - learn_cfg.train_start) / period)
        .round()
        .max(2.0);
    let hold = (periods / 4.0).round().max(1.0);
    let split = learn_cfg.train_end - hold * period;
    let n = trace.feeds.len();
    let feeds = sample(n, sizes.0);
    let users = sample(trace.users.len(), sizes.1);
    let budget = budget_for(n) * feeds.len() as f64 / n.max(1) as f64;
    let scorer = Scorer::new(trace, &feeds, &users, split, learn_cfg.train_end);
    let mut rows = Vec::new();
    for &shrinkage in shrinkages {
        let lc = LearnConfig {
            train_end: split,
            shrinkage,
            ..learn_cfg.clone()
        };
        let learned = learn(trace, &lc);
        let models: Vec<_> = feeds.iter().map(|&f| learned.models[f].clone()).collect();
        for &smoothing in smoothings {
            let pc = PlanConfig {
                smoothing,
                budget,
                ..plan_cfg.clone()
            };
            let realized = match solve(&models, &pc) {
                Ok(plan) => scorer.score(&FeedSchedule::from_plan(&plan, &pc), pc.metric),
                Err(_) => f64::INFINITY,
            };
            rows.push(TuneRow {
                smoothing,
                shrinkage,
                realized,
            });
        }
    }
    let (smoothing, shrinkage) = rows
        .iter()
        .min_by(|a, b| a.realized.total_cmp(&b.realized))
        .map(|r| (r.smoothing, r.shrinkage))
        .unwrap_or((Smoothing::Linear, 8.0));
    Tuned {
        smoothing,
        shrinkage,
        rows,
        sample_feeds: feeds.len(),
    }
}

/// The realized objective of the sampled feeds' schedules on the held-out window.
struct Scorer<'t> {
    trace: &'t Trace,
    feeds: &'t [usize],
    /// Position of each trace feed in the sample.
    slot: Vec<Option<u32>>,
    /// Sampled users' accesses in the window, with the sampled feeds each one reads.
    reads: Vec<(f64, Vec<u32>)>,
    start: f64,
    end: f64,
}

impl<'t> Scorer<'t> {
    fn new(trace: &'t Trace, feeds: &'t [usize], users: &[usize], start: f64, end: f64) -> Self {
        let mut slot = vec![None; trace.feeds.len()];
        for (j, &f) in feeds.iter().enumerate() {
            slot[f] = Some(j as u32);
        }
        let mut user_in = vec![false; trace.users.len()];
        for &u in users {
            user_in[u] = true;
        }
        let reads = trace
            .accesses
            .iter()
            .filter(|a| a.ts >= start && a.ts < end && user_in[a.user as usize])
            .map(|a| {
                let read: Vec<u32> = match a.feed {
                    Some(f) => slot[f as usize].into_iter().collect(),
                    None => trace.subscriptions[a.user as usize]
                        .iter()
                        .filter_map(|&f| slot[f as usize])
                        .collect(),
                };
                (a.ts, read)
            })
            .collect();
        Scorer {
            trace,
            feeds,
            slot,
            reads,
            start,
            end,
        }
    }

    fn score(&self, sch: &[FeedSchedule], metric: Metric) -> f64 {
        debug_assert_eq!(sch.len(), self.feeds.len());
        debug_assert!(self.slot.iter().flatten().count() == self.feeds.len());
        match metric {
            Metric::Delay => {
                // Per feed in parallel, summed in feed order: [delay seconds, postings].
                let per: Vec<(f64, usize)> = self
                    .feeds
                    .par_iter()
                    .zip(sch)
                    .map(|(&f, s)| {
                        let posts = &self.trace.postings[f];
                        let lo = posts.partition_point(|&x| x < self.start);
                        let hi = posts.partition_point(|&x| x < self.end);
                        let (mut sum, mut count) = (0.0, 0);
                        for &t in &posts[lo..hi] {
                            let d = s.next_fetch(t) - t;
                            if d.is_finite() {
                                sum += d;
                                count += 1;
                            }
                        }
                        (sum, count)
                    })
                    .collect();
                let (sum, count) = per.iter().fold((0.0, 0), |(s, c), &(a, b)| (s + a, c + b));
                if count == 0 {
                    0.0
                } else {
                    sum / count as f64 / 60.0
                }
            }
            Metric::Miss | Metric::AccessDelay => {
                let per: Vec<(f64, f64)> = self
                    .reads
                    .par_chunks(4096)
                    .map(|chunk| {
                        let (mut missed, mut age) = (0.0, 0.0);
                        for (t, read) in chunk {
                            for &j in read {
                                let s = &sch[j as usize];
                                let posts = &self.trace.postings[self.feeds[j as usize]];
                                let last = s.last_fetch(*t);
                                let lo = posts.partition_point(|&x| x <= last);
                                let hi = posts.partition_point(|&x| x <= *t);
                                missed += (hi - lo) as f64;
                                age += posts[lo..hi].iter().map(|&x| t - x).sum::<f64>();
                            }
                        }
                        (missed, age)
                    })
                    .collect();
                let (missed, age) = per
                    .iter()
                    .fold((0.0, 0.0), |(m, a), &(x, y)| (m + x, a + y));
                let accesses = self.reads.len().max(1) as f64;
                if metric == Metric::Miss {
                    missed / accesses
                } else {
                    age / accesses / 60.0
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::planner::Policy;
    use crate::synth::{generate, SynthConfig};

    /// The sampled tuning's choice scores, on every feed, within 1% of the best candidate
    /// scored on every feed (the choice it stands in for).
    #[test]
    fn a_sample_chooses_as_well_as_every_feed() {
        let trace = generate(&SynthConfig {
            feeds: 4_000,
            users: 400,
            days: 14,
            mean_posts_per_day: 3.4,
            subs_per_user: 30,
            accesses_per_user_per_day: 20.0,
            weekend_factor: 1.0,
            hosts: 0,
            seed: 11,
            dynamics: Default::default(),
        });
        let lc = LearnConfig {
            period_seconds: 86_400.0,
            bins: 24,
            train_start: 0.0,
            train_end: 14.0 * 86_400.0,
            shrinkage: 0.0,
            explore_min_postings: 3,
            min_level: 1,
            max_level: 1440,
        };
        for metric in [Metric::Delay, Metric::Miss] {
            let pc = PlanConfig {
                metric,
                policy: Policy::Optimal,
                scheduler: crate::plan::planner::Scheduler::Exact,
                slots: 288,
                period_seconds: 86_400.0,
                budget: 4.0 * 4_000.0,
                host_caps: Default::default(),
                smoothing: Smoothing::Linear,
            };
            let budget = |_: usize| 4.0 * 4_000.0;
            let grids = (&SMOOTHING_GRID[..], &SHRINKAGE_GRID[..]);
            let sampled = tune(&trace, &lc, &pc, &budget, grids.0, grids.1);
            assert_eq!(sampled.sample_feeds, 1_000);
            let full = tune_on(&trace, &lc, &pc, &budget, grids, (4_000, 400));
            let best = full
                .rows
                .iter()
                .map(|r| r.realized)
                .fold(f64::INFINITY, f64::min);
            let chosen = full
                .rows
                .iter()
                .find(|r| r.smoothing == sampled.smoothing && r.shrinkage == sampled.shrinkage)
                .unwrap()
                .realized;
            assert!(
                chosen <= best * 1.01,
                "{metric}: sampled choice {chosen} vs best {best}: {:?}",
                full.rows
            );
            // And the candidates really differ: the test would catch a poor choice.
            let worst = full.rows.iter().map(|r| r.realized).fold(0.0, f64::max);
            assert!(worst > best * 1.02, "{metric}: {:?}", full.rows);
        }
    }

    #[test]
    fn samples_are_fixed_sorted_and_sized() {
        assert_eq!(sample(5, 10), vec![0, 1, 2, 3, 4]);
        let a = sample(100_000, 12_500);
        assert_eq!(a.len(), 12_500);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a, sample(100_000, 12_500), "the same every run");
        // Spread over the whole range, not a prefix.
        assert!(a.iter().filter(|&&i| i >= 50_000).count() > 5_000);
        assert_eq!(sample_size(500, 8), 500);
        assert_eq!(sample_size(4_000, 8), 1_000);
        assert_eq!(sample_size(1_000_000, 8), 125_000);
        assert_eq!(sample_size(1_000_000, 1), 1_000_000);
    }
}
