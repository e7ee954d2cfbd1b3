//! Replaying a trace against a plan: realized delay, misses and access delay, next to
//! what the model expected; and choosing smoothing and shrinkage on held-out days.
//!
//! Definitions (as in the papers): a posting waits until the first fetch at or after it;
//! an access misses the postings published since the last fetch before it, and its access
//! delay is the summed age of those postings at access time. An app-level access counts
//! for every subscription of its user; figures "per access" divide by access events.

use crate::plan::cost::{schedule_costs, CostTable, Metric};
use crate::plan::pattern::expand;
use crate::plan::planner::{FeedModel, Plan, PlanConfig};
use crate::trace::Trace;

/// A feed's fetch times: `offset + i·period` for every integer `i`.
#[derive(Clone, Debug)]
pub struct FeedSchedule {
    /// Sorted offsets in `[0, period)`, seconds from the trace start.
    pub offsets: Vec<f64>,
    /// Repeat period in seconds.
    pub period: f64,
}

impl FeedSchedule {
    /// The schedules of a plan, in feed order.
    pub fn from_plan(plan: &Plan, cfg: &PlanConfig) -> Vec<FeedSchedule> {
        let h = cfg.period_seconds / cfg.slots as f64;
        plan.feeds
            .iter()
            .map(|f| {
                let base = f.phase_period as f64 * cfg.period_seconds;
                let mut offsets: Vec<f64> = f.slots.iter().map(|&s| base + s as f64 * h).collect();
                offsets.sort_by(f64::total_cmp);
                FeedSchedule {
                    offsets,
                    period: f.period_multiple as f64 * cfg.period_seconds,
                }
            })
            .collect()
    }

    /// First fetch at or after `t`.
    pub fn next_fetch(&self, t: f64) -> f64 {
        let phase = t.rem_euclid(self.period);
        let base = t - phase;
        let i = self.offsets.partition_point(|&o| o < phase);
        match self.offsets.get(i) {
            Some(&o) => base + o,
            None => base + self.period + self.offsets[0],
        }
    }

    /// Last fetch strictly before `t`.
    pub fn last_fetch(&self, t: f64) -> f64 {
        let phase = t.rem_euclid(self.period);
        let base = t - phase;
        let i = self.offsets.partition_point(|&o| o < phase);
        if i > 0 {
            base + self.offsets[i - 1]
        } else {
            base - self.period + self.offsets[self.offsets.len() - 1]
        }
    }

    /// Fetches in `[start, end)`.
    pub fn fetches_between(&self, start: f64, end: f64) -> u64 {
        self.offsets
            .iter()
            .map(|&o| {
                let first = ((start - o) / self.period).ceil();
                let last = ((end - o) / self.period).ceil();
                (last - first).max(0.0) as u64
            })
            .sum()
    }
}

/// Realized figures over a test window.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Realized {
    /// Postings in the window.
    pub postings: usize,
    /// Average delay per posting, minutes.
    pub avg_delay_min: f64,
    /// Median delay per posting, minutes.
    pub p50_delay_min: f64,
    /// 99th percentile delay per posting, minutes.
    pub p99_delay_min: f64,
    /// Largest delay, minutes.
    pub max_delay_min: f64,
    /// Access events in the window.
    pub accesses: usize,
    /// Missed postings per access.
    pub missed_per_access: f64,
    /// Summed age of missed postings per access, minutes.
    pub access_delay_min_per_access: f64,
    /// Fetches made in the window.
    pub fetches: u64,
}

impl Realized {
    /// The figure a metric optimizes.
    pub fn objective(&self, metric: Metric) -> f64 {
        match metric {
            Metric::Delay => self.avg_delay_min,
            Metric::Miss => self.missed_per_access,
            Metric::AccessDelay => self.access_delay_min_per_access,
        }
    }
}

/// Replays postings and accesses in `[start, end)` against the schedules.
pub fn replay(trace: &Trace, schedules: &[FeedSchedule], start: f64, end: f64) -> Realized {
    let fetches = schedules
        .iter()
        .map(|s| s.fetches_between(start, end))
        .sum();
    replay_with(
        trace,
        &|f, t| schedules[f].next_fetch(t),
        &|f, t| schedules[f].last_fetch(t),
        fetches,
        start,
        end,
    )
}

/// Replays postings and accesses in `[start, end)` against fetch logs: each feed's actual
/// fetch times (seconds from the trace start, ascending), as a live run made them. A
/// posting no fetch followed is left out of the delays and counted in `undiscovered`.
pub fn replay_log(trace: &Trace, logs: &[Vec<f64>], start: f64, end: f64) -> (Realized, usize) {
    let next = |f: usize, t: f64| {
        let l = &logs[f];
        l.get(l.partition_point(|&x| x < t))
            .copied()
            .unwrap_or(f64::INFINITY)
    };
    let last = |f: usize, t: f64| {
        let l = &logs[f];
        match l.partition_point(|&x| x < t) {
            0 => f64::NEG_INFINITY,
            i => l[i - 1],
        }
    };
    let fetches = logs
        .iter()
        .map(|l| (l.partition_point(|&x| x < end) - l.partition_point(|&x| x < start)) as u64)
        .sum();
    let undiscovered = trace
        .postings
        .iter()
        .enumerate()
        .map(|(f, p)| {
            p.iter()
                .filter(|&&t| t >= start && t < end && next(f, t).is_infinite())
                .count()
        })
        .sum();
    (
        replay_with(trace, &next, &last, fetches, start, end),
        undiscovered,
    )
}

/// Postings in `[start, end)` that no fetch saw: by the first fetch after one, `items`
/// newer postings had pushed it off the feed's document (which holds the newest `items`).
/// A later fetch cannot see it either, so it is lost to the aggregator; the delay figures
/// above still count it at that fetch.
pub fn scrolled_off(
    trace: &Trace,
    next_fetch: &dyn Fn(usize, f64) -> f64,
    items: usize,
    start: f64,
    end: f64,
) -> usize {
    trace
        .postings
        .iter()
        .enumerate()
        .map(|(f, posts)| {
            let lo = posts.partition_point(|&x| x < start);
            let hi = posts.partition_point(|&x| x < end);
            (lo..hi)
                .filter(|&i| {
                    let t = next_fetch(f, posts[i]);
                    t.is_finite() && posts.partition_point(|&x| x <= t) - i > items
                })
                .count()
        })
        .sum()
}

/// [`scrolled_off`] for schedules.
pub fn scrolled_off_schedules(
    trace: &Trace,
    schedules: &[FeedSchedule],
    items: usize,
    start: f64,
    end: f64,
) -> usize {
    scrolled_off(trace, &|f, t| schedules[f].next_fetch(t), items, start, end)
}

/// [`scrolled_off`] for fetch logs (as [`replay_log`] takes them).
pub fn scrolled_off_log(
    trace: &Trace,
    logs: &[Vec<f64>],
    items: usize,
    start: f64,
    end: f64,
) -> usize {
    let next = |f: usize, t: f64| {
        let l = &logs[f];
        l.get(l.partition_point(|&x| x < t))
            .copied()
            .unwrap_or(f64::INFINITY)
    };
    scrolled_off(trace, &next, items, start, end)
}

fn replay_with(
    trace: &Trace,
    next_fetch: &dyn Fn(usize, f64) -> f64,
    last_fetch: &dyn Fn(usize, f64) -> f64,
    fetches: u64,
    start: f64,
    end: f64,
) -> Realized {
    let mut delays: Vec<f64> = Vec::new();
    for (f, posts) in trace.postings.iter().enumerate() {
        for &ts in posts.iter().filter(|&&t| t >= start && t < end) {
            let d = next_fetch(f, ts) - ts;
            if d.is_finite() {
                delays.push(d);
            }
        }
    }
    let mut r = Realized {
        postings: delays.len(),
        ..Default::default()
    };
    if !delays.is_empty() {
        delays.sort_by(f64::total_cmp);
        let q = |p: f64| {
            delays[((p * (delays.len() - 1) as f64).round() as usize).min(delays.len() - 1)] / 60.0
        };
        r.avg_delay_min = delays.iter().sum::<f64>() / delays.len() as f64 / 60.0;
        r.p50_delay_min = q(0.5);
        r.p99_delay_min = q(0.99);
        r.max_delay_min = delays[delays.len() - 1] / 60.0;
    }
    let (mut missed, mut age) = (0.0f64, 0.0f64);
    let one = |f: usize, t: f64, missed: &mut f64, age: &mut f64| {
        let last = last_fetch(f, t);
        let posts = &trace.postings[f];
        let lo = posts.partition_point(|&x| x <= last);
        let hi = posts.partition_point(|&x| x <= t);
        *missed += (hi - lo) as f64;
        *age += posts[lo..hi].iter().map(|&x| t - x).sum::<f64>();
    };
    for a in trace
        .accesses
        .iter()
        .filter(|a| a.ts >= start && a.ts < end)
    {
        r.accesses += 1;
        match a.feed {
            Some(f) => one(f as usize, a.ts, &mut missed, &mut age),
            None => {
                for &f in &trace.subscriptions[a.user as usize] {
                    one(f as usize, a.ts, &mut missed, &mut age);
                }
            }
        }
    }
    if r.accesses > 0 {
        r.missed_per_access = missed / r.accesses as f64;
        r.access_delay_min_per_access = age / r.accesses as f64 / 60.0;
    }
    r.fetches = fetches;
    r
}

/// What the learned model expects of a plan, in the same units as [`Realized`].
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Expected {
    /// Expected average delay per posting, minutes.
    pub avg_delay_min: f64,
    /// Expected missed postings per access.
    pub missed_per_access: f64,
    /// Expected access delay per access, minutes.
    pub access_delay_min_per_access: f64,
}

/// Evaluates a plan's schedules on the model under all three metrics (unweighted).
pub fn expected(
    models: &[FeedModel],
    plan: &Plan,
    cfg: &PlanConfig,
    users_accesses_per_period: f64,
) -> Expected {
    use rayon::prelude::*;
    let h = cfg.period_seconds / cfg.slots as f64;
    // Per feed: [delay, miss, access delay, postings]; summed in feed order afterwards, so
    // the figures do not depend on the thread count.
    let per_feed: Vec<[f64; 4]> = models
        .par_iter()
        .zip(&plan.feeds)
        .map_init(
            || (Vec::new(), Vec::new()),
            |(p, q), (m, fp)| {
                m.expand_posts(cfg, p);
                expand(&m.access_bins, cfg.slots, cfg.smoothing, q);
                let mut out = [0.0; 4];
                if fp.period_multiple > 1 {
                    for (k, metric) in Metric::ALL.into_iter().enumerate() {
                        let t = CostTable::new(metric, p, q, h);
                        out[k] = t.multi_period_cost(fp.slots[0] as usize, fp.period_multiple);
                    }
                } else {
                    let [d, m, a] = schedule_costs(p, q, h, &fp.slots);
                    out[..3].copy_from_slice(&[d, m, a]);
                }
                out[3] = p.iter().sum::<f64>();
                out
            },
        )
        .collect();
    let (mut delay, mut miss, mut ad, mut posts) = (0.0, 0.0, 0.0, 0.0);
    for [d, m, a, n] in per_feed {
        delay += d;
        miss += m;
        ad += a;
        posts += n;
    }
    let per_access = users_accesses_per_period.max(1e-12);
    Expected {
        avg_delay_min: if posts > 0.0 {
            delay / posts / 60.0
        } else {
            0.0
        },
        missed_per_access: miss / per_access,
        access_delay_min_per_access: ad / per_access / 60.0,
    }
}

/// Access events per period in a window (the denominator of the per-access figures).
pub fn accesses_per_period(trace: &Trace, start: f64, end: f64, period: f64) -> f64 {
    let n = trace
        .accesses
        .iter()
        .filter(|a| a.ts >= start && a.ts < end)
        .count();
    n as f64 / ((end - start) / period).max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Access, FeedRow};

    fn sched() -> FeedSchedule {
        FeedSchedule {
            offsets: vec![3600.0, 43_200.0],
            period: 86_400.0,
        }
    }

    #[test]
    fn fetch_times_follow_the_definitions() {
        let s = sched();
        assert_eq!(s.next_fetch(0.0), 3600.0);
        assert_eq!(
            s.next_fetch(3600.0),
            3600.0,
            "a posting at a fetch instant waits 0"
        );
        assert_eq!(s.next_fetch(50_000.0), 86_400.0 + 3600.0);
        assert_eq!(s.last_fetch(3600.0), 43_200.0 - 86_400.0, "strictly before");
        assert_eq!(s.last_fetch(4000.0), 3600.0);
        assert_eq!(s.fetches_between(0.0, 2.0 * 86_400.0), 4);
        assert_eq!(s.fetches_between(3600.0, 3601.0), 1);
        assert_eq!(s.fetches_between(3601.0, 43_200.0), 0);
    }

    #[test]
    fn scrolled_off_counts_postings_pushed_off_before_the_next_fetch() {
        // Five postings at 10..50 s, fetched at 3,600 s, a document of 3 items: the two
        // oldest were off it by then. Then three postings before the 43,200 fetch: none lost.
        let trace = Trace {
            feeds: vec![FeedRow {
                id: "f0".into(),
                weight: 1.0,
                host: None,
            }],
            postings: vec![vec![
                10.0, 20.0, 30.0, 40.0, 50.0, 40_000.0, 41_000.0, 42_000.0,
            ]],
            users: vec![],
            subscriptions: vec![],
            accesses: vec![],
            end_ts: 86_400.0,
        };
        let s = [sched()];
        assert_eq!(scrolled_off_schedules(&trace, &s, 3, 0.0, 86_400.0), 2);
        assert_eq!(scrolled_off_schedules(&trace, &s, 5, 0.0, 86_400.0), 0);
        assert_eq!(scrolled_off_schedules(&trace, &s, 2, 0.0, 86_400.0), 4);
        // Only postings inside the window count.
        assert_eq!(scrolled_off_schedules(&trace, &s, 3, 15.0, 86_400.0), 1);
        // The same from a fetch log; a posting no fetch followed is not counted here.
        let log = vec![vec![3600.0]];
        assert_eq!(scrolled_off_log(&trace, &log, 3, 0.0, 86_400.0), 2);
    }

    #[test]
    fn replay_counts_delays_misses_and_ages_by_hand() {
        let trace = Trace {
            feeds: vec![FeedRow {
                id: "f0".into(),
                weight: 1.0,
                host: None,
            }],
            postings: vec![vec![1000.0, 40_000.0]],
            users: vec![("u".into(), 1.0)],
            subscriptions: vec![vec![0]],
            accesses: vec![
                Access {
                    user: 0,
                    feed: Some(0),
                    ts: 3700.0,
                },
                Access {
                    user: 0,
                    feed: None,
                    ts: 42_000.0,
                },
            ],
            end_ts: 42_000.0,
        };
        let r = replay(&trace, &[sched()], 0.0, 86_400.0);
        assert_eq!(r.postings, 2);
        // Waits 2,600 s and 3,200 s.
        assert!((r.avg_delay_min - 2900.0 / 60.0).abs() < 1e-9);
        assert!((r.max_delay_min - 3200.0 / 60.0).abs() < 1e-9);
        // The first access sees nothing new since 3,600; the second misses the 40,000
        // posting (last fetch 3,600), 2,000 s old.
        assert_eq!(r.accesses, 2);
        assert!((r.missed_per_access - 0.5).abs() < 1e-12);
        assert!((r.access_delay_min_per_access - 1000.0 / 60.0).abs() < 1e-9);
        assert_eq!(r.fetches, 2);
    }
}
