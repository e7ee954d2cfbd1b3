//! Tests of the planner's math: costs against their continuous definitions, the exact
//! solver against brute force, and the papers' worked examples.

use super::brute::solve_brute;
use super::cost::{schedule_costs, CostTable, Metric};
use super::exact::{solve_exact, ExactSolver};
use proptest::prelude::*;

/// The continuous definition of an interval cost, integrated numerically with `k`
/// midpoint sub-points per slot. Independent of the prefix-sum algebra.
fn numeric_cost(metric: Metric, p: &[f64], q: &[f64], h: f64, a: usize, b: usize, k: usize) -> f64 {
    let n = p.len();
    // Sub-points: (time, posting mass, access mass).
    let mut pts = Vec::new();
    for slot in a..b {
        for s in 0..k {
            let t = (slot as f64 + (s as f64 + 0.5) / k as f64) * h;
            let pm = p[slot % n] / k as f64;
            let qm = if q.is_empty() {
                0.0
            } else {
                q[slot % n] / k as f64
            };
            pts.push((t, pm, qm));
        }
    }
    let end = b as f64 * h;
    match metric {
        Metric::Delay => pts.iter().map(|&(t, pm, _)| pm * (end - t)).sum(),
        Metric::Miss | Metric::AccessDelay => {
            let mut total = 0.0;
            for &(t, _, qm) in &pts {
                for &(x, pm, _) in &pts {
                    if x < t {
                        total += qm * pm * if metric == Metric::Miss { 1.0 } else { t - x };
                    }
                }
            }
            total
        }
    }
}

fn rel_close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn single_slot_interval_has_the_in_slot_expectations() {
    // One slot of length 60 s with 3 postings and 2 accesses.
    let (p, q, h) = (vec![3.0, 0.0, 0.0], vec![2.0, 0.0, 0.0], 60.0);
    let d = CostTable::new(Metric::Delay, &p, &q, h);
    let m = CostTable::new(Metric::Miss, &p, &q, h);
    let ad = CostTable::new(Metric::AccessDelay, &p, &q, h);
    assert!(rel_close(d.cost(0, 1), 3.0 * 30.0, 1e-12)); // mean wait h/2
    assert!(rel_close(m.cost(0, 1), 3.0 * 2.0 / 2.0, 1e-12)); // P(x < t) = 1/2
    assert!(rel_close(ad.cost(0, 1), 3.0 * 2.0 * 60.0 / 6.0, 1e-12)); // E[(t-x)+] = h/6
}

#[test]
fn costs_match_numeric_integration_of_the_definitions() {
    let p = [0.5, 2.0, 0.0, 1.25, 3.0, 0.75, 0.0, 1.0];
    let q = [1.0, 0.0, 2.5, 0.5, 0.25, 3.0, 1.5, 0.0];
    let h = 10.0;
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, h);
        for a in 0..8 {
            for b in a + 1..=a + 8 {
                let exact = t.cost(a, b);
                let num = numeric_cost(metric, &p, &q, h, a, b, 200);
                assert!(
                    rel_close(exact, num, 5e-3),
                    "{metric} [{a},{b}): table {exact} vs numeric {num}"
                );
            }
        }
    }
}

#[test]
fn multi_period_cost_equals_a_table_over_k_periods() {
    let p = [0.5, 2.0, 0.0, 1.25, 3.0, 0.75];
    let q = [1.0, 0.0, 2.5, 0.5, 0.25, 3.0];
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, 7.0);
        for k in 1..=5u32 {
            let pk: Vec<f64> = (0..6 * k as usize).map(|i| p[i % 6]).collect();
            let qk: Vec<f64> = (0..6 * k as usize).map(|i| q[i % 6]).collect();
            let long = CostTable::new(metric, &pk, &qk, 7.0);
            for a in 0..6 {
                let direct = long.cost(a, a + 6 * k as usize) / k as f64;
                let closed = t.multi_period_cost(a, k);
                assert!(
                    rel_close(direct, closed, 1e-10),
                    "{metric} k={k} a={a}: {direct} vs {closed}"
                );
            }
        }
    }
}

#[test]
fn quadrangle_inequality_holds_on_random_patterns() {
    let p = [0.1, 4.0, 0.0, 1.0, 2.0, 0.3, 0.0, 5.0, 1.0, 0.2];
    let q = [2.0, 0.0, 1.0, 3.0, 0.5, 0.0, 4.0, 1.0, 0.1, 2.0];
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, 1.0);
        for a in 0..10 {
            for b in a..=a + 10 {
                for c in b + 1..=a + 10 {
                    for d in c..=a + 10 {
                        if a == b || c == d {
                            continue;
                        }
                        let lhs = t.cost(a, c) + t.cost(b, d);
                        let rhs = t.cost(a, d) + t.cost(b, c);
                        assert!(lhs <= rhs + 1e-9 * (1.0 + rhs), "{metric} {a} {b} {c} {d}");
                    }
                }
            }
        }
    }
}

fn pattern(n: usize) -> impl Strategy<Value = Vec<f64>> {
    // Mix exact zeros and small integers (many ties) with continuous values.
    proptest::collection::vec(
        prop_oneof![Just(0.0), (0u32..4).prop_map(f64::from), 0.0f64..5.0],
        n,
    )
}

fn instance() -> impl Strategy<Value = (Vec<f64>, Vec<f64>, usize)> {
    (2usize..=24).prop_flat_map(|n| (pattern(n), pattern(n), 1usize..=5.min(n)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn exact_solver_equals_brute_force((p, q, m) in instance()) {
        for metric in Metric::ALL {
            let t = CostTable::new(metric, &p, &q, 1.0);
            let brute = solve_brute(&t, m);
            let exact = solve_exact(&t, m);
            prop_assert_eq!(exact.slots.len(), m);
            prop_assert!(exact.slots.windows(2).all(|w| w[0] < w[1]));
            // The reported cost is the cost of the reported slots.
            prop_assert!(rel_close(exact.cost, t.schedule_cost(&exact.slots), 1e-9));
            prop_assert!(
                rel_close(exact.cost, brute.cost, 1e-9),
                "{} m={} exact {} {:?} brute {} {:?}", metric, m, exact.cost, exact.slots, brute.cost, brute.slots
            );
        }
    }
}

/// Prices per boundary as a weekly plan's days give them (a few runs of one price, one of
/// them free) or any at all.
fn prices(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop_oneof![
        (1usize..=7, proptest::collection::vec(0.0f64..3.0, 7)).prop_map(move |(days, w)| {
            let low = w[..days].iter().fold(f64::INFINITY, |a, &b| a.min(b));
            (0..n).map(|x| w[x * days / n] - low).collect()
        }),
        proptest::collection::vec(prop_oneof![Just(0.0), 0.0f64..4.0], n),
    ]
}

fn priced_instance() -> impl Strategy<Value = (Vec<f64>, Vec<f64>, Vec<f64>, usize)> {
    (2usize..=21).prop_flat_map(|n| (pattern(n), pattern(n), prices(n), 1usize..=5.min(n)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// With a price on each fetch the exact solver still finds the cheapest schedule, the
    /// metric plus its fetches' prices, checked against every subset priced by hand on an
    /// unpriced table.
    #[test]
    fn the_exact_solver_with_prices_equals_brute_force((p, q, w, m) in priced_instance()) {
        for metric in Metric::ALL {
            let plain = CostTable::new(metric, &p, &q, 1.0);
            let t = CostTable::new_priced(Default::default(), metric, &p, &q, 1.0, &w);
            let priced = |slots: &[u32]| {
                plain.schedule_cost(slots) + slots.iter().map(|&x| w[x as usize]).sum::<f64>()
            };
            let brute = solve_brute(&t, m);
            prop_assert!(rel_close(brute.cost, priced(&brute.slots), 1e-9));
            let exact = solve_exact(&t, m);
            prop_assert_eq!(exact.slots.len(), m);
            prop_assert!(rel_close(exact.cost, priced(&exact.slots), 1e-9));
            prop_assert!(
                rel_close(exact.cost, brute.cost, 1e-9),
                "{} m={} w={:?} exact {} {:?} brute {} {:?}",
                metric, m, w, exact.cost, exact.slots, brute.cost, brute.slots
            );
            // What the plan reports leaves the prices out.
            let unpriced = exact.cost - t.price_of(&exact.slots, 1);
            prop_assert!(rel_close(unpriced, plain.schedule_cost(&exact.slots), 1e-9));
            // A fetch every k periods pays its price once per k periods.
            for k in [1u32, 3] {
                for (a, wa) in w.iter().enumerate() {
                    let want = plain.multi_period_cost(a, k) + wa / f64::from(k);
                    prop_assert!(rel_close(t.multi_period_cost(a, k), want, 1e-9));
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The one-pass pricing of a schedule under every metric is each metric's table's.
    #[test]
    fn one_pass_schedule_costs_equal_the_tables(
        (p, q, _) in instance(),
        picks in proptest::collection::btree_set(0usize..24, 1..6),
        h in 0.5f64..90.0,
    ) {
        let n = p.len();
        let slots: Vec<u32> = picks.into_iter().filter(|&s| s < n).map(|s| s as u32).collect();
        prop_assume!(!slots.is_empty());
        let all = schedule_costs(&p, &q, h, &slots);
        let silent = schedule_costs(&p, &[], h, &slots);
        for (k, metric) in Metric::ALL.into_iter().enumerate() {
            let want = CostTable::new(metric, &p, &q, h).schedule_cost(&slots);
            prop_assert!(
                (all[k] - want).abs() <= 1e-9 * want.max(1.0),
                "{} {:?}: one pass {} table {}", metric, slots, all[k], want
            );
        }
        prop_assert_eq!(silent[0], all[0]);
        prop_assert_eq!((silent[1], silent[2]), (0.0, 0.0));
    }
}

#[test]
fn one_pass_schedule_costs_of_an_empty_schedule_are_infinite() {
    let p = [1.0, 2.0, 0.5];
    assert_eq!(schedule_costs(&p, &p, 60.0, &[]), [f64::INFINITY; 3]);
}

#[test]
fn constant_rates_give_uniform_spacing() {
    let n = 1440;
    let p = vec![1.0; n];
    let q = vec![0.5; n];
    let mut solver = ExactSolver::new();
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, 60.0);
        for m in [1usize, 2, 3, 5, 7, 24, 48] {
            let s = solver.solve(&t, m);
            let mut gaps: Vec<usize> = s.slots.windows(2).map(|w| (w[1] - w[0]) as usize).collect();
            gaps.push(s.slots[0] as usize + n - *s.slots.last().unwrap() as usize);
            let (min, max) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
            assert!(max - min <= 1, "{metric} m={m}: gaps {min}..{max}");
        }
    }
}

/// Slot masses of a continuous rate on `[0, period)`, integrated per slot (Simpson).
fn discretize(rate: impl Fn(f64) -> f64, n: usize, period: f64) -> Vec<f64> {
    let h = period / n as f64;
    (0..n)
        .map(|j| {
            let (a, b) = (j as f64 * h, (j + 1) as f64 * h);
            (rate(a) + 4.0 * rate((a + b) / 2.0) + rate(b)) * h / 6.0
        })
        .collect()
}

#[test]
fn tkde_example_1_best_half_at_one_worst_three_halves() {
    // λ = 1 on [0, 1), 0 on [1, 2), period 2, one fetch per period.
    let n = 2000;
    let p: Vec<f64> = (0..n)
        .map(|j| if j < n / 2 { 2.0 / n as f64 } else { 0.0 })
        .collect();
    let t = CostTable::new(Metric::Delay, &p, &[], 2.0 / n as f64);
    let best = solve_exact(&t, 1);
    assert_eq!(best.slots, vec![1000], "best fetch at t = 1");
    assert!(
        (best.cost - 0.5).abs() < 1e-9,
        "best total delay 1/2, got {}",
        best.cost
    );
    let worst = (0..n).map(|a| t.cost(a, a + n)).fold(0.0f64, f64::max);
    // Worst is just after t = 0: 3/2 in the limit; one slot (0.001) from it here.
    assert!(
        (worst - 1.5).abs() < 2e-3,
        "worst total delay 3/2, got {worst}"
    );
}

/// Largest relative violation of a metric's optimality condition at each fetch of a cyclic
/// schedule, evaluated on the continuous rates (not the slot model).
fn condition_residual(
    metric: Metric,
    lam: &dyn Fn(f64) -> f64,
    u: &dyn Fn(f64) -> f64,
    taus: &[f64],
) -> f64 {
    let integrate = |f: &dyn Fn(f64) -> f64, a: f64, b: f64| {
        let k = 2000;
        let h = (b - a) / k as f64;
        (0..k).map(|i| f(a + (i as f64 + 0.5) * h)).sum::<f64>() * h
    };
    let m = taus.len();
    let mut worst: f64 = 0.0;
    for j in 0..m {
        let prev = if j == 0 {
            taus[m - 1] - 1.0
        } else {
            taus[j - 1]
        };
        let tau = taus[j];
        let next = if j + 1 == m {
            taus[0] + 1.0
        } else {
            taus[j + 1]
        };
        let (lhs, rhs) = match metric {
            Metric::Delay => (lam(tau) * (next - tau), integrate(lam, prev, tau)),
            Metric::Miss => (
                lam(tau) * integrate(u, tau, next),
                u(tau) * integrate(lam, prev, tau),
            ),
            Metric::AccessDelay => (
                lam(tau) * integrate(&|t| (t - tau) * u(t), tau, next),
                u(tau) * integrate(&|f| (tau - f) * lam(f), prev, tau),
            ),
        };
        worst = worst.max((lhs - rhs).abs() / rhs.abs().max(1e-12));
    }
    worst
}

#[test]
fn optimality_conditions_hold_at_the_exact_optimum() {
    use std::f64::consts::PI;
    let n = 1440;
    // TKDE Example 2 (delay) and ICWSM Example 2 (miss, access-delay): six fetches a period.
    type Rate = fn(f64) -> f64;
    let cases: [(Metric, Rate, Rate); 3] = [
        (Metric::Delay, |t| 2.0 + 2.0 * (2.0 * PI * t).sin(), |_| 1.0),
        (
            Metric::Miss,
            |t| 2.0 + (2.0 * PI * t).sin(),
            |t| 2.0 + (2.0 * PI * t).cos(),
        ),
        (
            Metric::AccessDelay,
            |t| 2.0 + (2.0 * PI * t).sin(),
            |t| 2.0 + (2.0 * PI * t).cos(),
        ),
    ];
    for (metric, lam, u) in cases {
        let p = discretize(lam, n, 1.0);
        let q = discretize(u, n, 1.0);
        let t = CostTable::new(metric, &p, &q, 1.0 / n as f64);
        let best = solve_exact(&t, 6);
        let taus: Vec<f64> = best.slots.iter().map(|&s| s as f64 / n as f64).collect();
        let at_opt = condition_residual(metric, &lam, &u, &taus);
        let uniform: Vec<f64> = (0..6).map(|i| i as f64 / 6.0).collect();
        let at_uniform = condition_residual(metric, &lam, &u, &uniform);
        // One slot moves a point by 1/1440 of the period; over ~1/6-period intervals that
        // is at most a few percent of either side of the condition.
        assert!(
            at_opt < 0.03,
            "{metric}: residual {at_opt} at the optimum {:?}",
            best.slots
        );
        assert!(
            at_uniform > 0.15,
            "{metric}: uniform spacing should violate it ({at_uniform})"
        );
    }
}

#[test]
fn paper_search_never_beats_exact_and_finds_it_on_smooth_rates() {
    use super::search::condition_search;
    use std::f64::consts::PI;
    let n = 288;
    let p = discretize(|t| 2.0 + 2.0 * (2.0 * PI * t).sin(), n, 1.0);
    let q = discretize(|t| 2.0 + (2.0 * PI * t).cos(), n, 1.0);
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, 1.0 / n as f64);
        for m in [2usize, 3, 6] {
            let exact = solve_exact(&t, m);
            let out = condition_search(&t, &p, &q, m, 2);
            let found = out.schedule.expect("a smooth pattern has closing plans");
            assert!(found.cost >= exact.cost * (1.0 - 1e-12));
            assert!(
                found.cost <= exact.cost * 1.01,
                "{metric} m={m}: search {} vs exact {}",
                found.cost,
                exact.cost
            );
        }
    }
}

#[test]
fn solving_several_counts_at_once_matches_single_solves() {
    use std::f64::consts::PI;
    let n = 288;
    let p = discretize(|t| 1.0 + (2.0 * PI * t).sin().max(0.0) * 4.0, n, 1.0);
    let q = discretize(|t| 2.0 + (4.0 * PI * t).cos(), n, 1.0);
    for metric in Metric::ALL {
        let t = CostTable::new(metric, &p, &q, 300.0);
        let counts = [5usize, 1, 4, 6, 2, 288, 17];
        let together = ExactSolver::new().solve_levels(&t, &counts);
        for (&m, got) in counts.iter().zip(&together) {
            let alone = solve_exact(&t, m);
            assert_eq!(got.slots.len(), m);
            assert!(
                rel_close(got.cost, alone.cost, 1e-12),
                "{metric} m={m}: {} vs {}",
                got.cost,
                alone.cost
            );
        }
    }
}

/// Expected postings in the widest gap between consecutive fetch boundaries of `slots`
/// (cyclic), summed slot by slot: the mass of slots `b_i .. b_{i+1}` waits for `b_{i+1}`.
fn widest_gap_by_hand(post: &[f64], slots: &[u32]) -> f64 {
    let n = post.len();
    let mut b: Vec<usize> = slots.iter().map(|&s| s as usize).collect();
    b.sort_unstable();
    (0..b.len())
        .map(|i| {
            let (from, to) = (b[i], if i + 1 < b.len() { b[i + 1] } else { b[0] + n });
            (from..to).map(|j| post[j % n]).sum::<f64>()
        })
        .fold(0.0, f64::max)
}

#[test]
fn document_level_is_the_fewest_fetches_whose_optimal_schedule_holds_the_document() {
    use super::alloc::level_period_multiple;
    use super::floor::document_level;
    use super::pattern::{expand, Smoothing};
    use super::planner::{FeedModel, PlanConfig, Policy, Scheduler};
    // 48 postings between 08:00 and 10:00, half a posting an hour otherwise; readers at
    // 20:00. A gap may hold 6 expected postings.
    let mut post = vec![0.5f32; 24];
    post[8] = 24.0;
    post[9] = 24.0;
    let mut access = vec![0.1f32; 24];
    access[20] = 30.0;
    let items = 6.0;
    let even = (24.0f64 * 24.0 / items).ceil() as i32;
    for metric in [Metric::Delay, Metric::AccessDelay] {
        let feed = FeedModel {
            weight: 1.0,
            post_bins: post.clone(),
            peaks: Vec::new(),
            access_bins: access.clone(),
            min_level: 1,
            max_level: 288,
            host: None,
            document: None,
        };
        let cfg = PlanConfig {
            metric,
            policy: Policy::Optimal,
            scheduler: Scheduler::Exact,
            slots: 288,
            period_seconds: 86_400.0,
            budget: 100.0,
            host_caps: Default::default(),
            smoothing: Smoothing::Step,
            day_prices: Default::default(),
            slot_capacity: None,
        };
        let level = document_level(&feed, &cfg, items, true);
        let (mut p, mut q) = (Vec::new(), Vec::new());
        expand(&feed.post_bins, 288, Smoothing::Step, &mut p);
        expand(&feed.access_bins, 288, Smoothing::Step, &mut q);
        let table = CostTable::new(metric, &p, &q, 300.0);
        let widest =
            |m: i32| widest_gap_by_hand(&p, &ExactSolver::new().solve(&table, m as usize).slots);
        assert!(
            widest(level) <= items + 1e-9,
            "{metric:?}: level {level} leaves {}",
            widest(level)
        );
        assert!(
            widest(level - 1) > items,
            "{metric:?}: {} fetches would do",
            level - 1
        );
        // At least the mean; placed where the postings are, far fewer than even spacing at
        // the busiest hour's rate needs.
        assert!(level as f64 >= 59.5 / items, "{metric:?}: {level}");
        if metric == Metric::Delay {
            assert!(
                level < even / 2,
                "delay places fetches at the burst: {level} vs {even}"
            );
        }
    }
    // 1.9 postings a day and room for ten between fetches: once every five days holds it
    // (9.5), every six does not (11.4).
    let quiet = FeedModel {
        weight: 1.0,
        post_bins: vec![1.9 / 24.0; 24],
        peaks: Vec::new(),
        access_bins: vec![0.0; 24],
        min_level: -10,
        max_level: 288,
        host: None,
        document: None,
    };
    let cfg = PlanConfig {
        metric: Metric::Delay,
        policy: Policy::Optimal,
        scheduler: Scheduler::Exact,
        slots: 288,
        period_seconds: 86_400.0,
        budget: 100.0,
        host_caps: Default::default(),
        smoothing: Smoothing::Step,
        day_prices: Default::default(),
        slot_capacity: None,
    };
    assert_eq!(
        level_period_multiple(document_level(&quiet, &cfg, 10.0, true)),
        5
    );
    assert!(
        document_level(&quiet, &cfg, 0.0, true) < -100,
        "no size known: no floor"
    );
    // A feed on a timer: 40 postings a day, 90% of them within 09:00-09:10. No schedule
    // splits a five-minute slot of 18, so no number of fetches keeps every gap within a
    // 7-item share of its document; the floor is what a slot that full allows (3), not the
    // top of its search range (even spacing at the busiest hour's rate: 124).
    let mut bins = vec![4.0 / 23.0; 24];
    bins[9] = 36.0;
    let timer = FeedModel {
        weight: 1.0,
        post_bins: bins,
        peaks: vec![super::pattern::Peak {
            start: 9.0 / 24.0,
            width: 10.0 / 1440.0,
            share: 0.9,
        }],
        access_bins: vec![0.0; 24],
        min_level: 1,
        max_level: 288,
        host: None,
        document: None,
    };
    let mut p = Vec::new();
    timer.expand_posts(&cfg, &mut p);
    let busiest = p.iter().fold(0.0f64, |m, &x| m.max(x));
    assert!(busiest > 7.0, "{busiest}");
    assert_eq!(document_level(&timer, &cfg, 7.0, true), 3);
    // Without the peak the hour's 36 spread over its twelve slots, and the search finds
    // the fetches that hold the document there.
    let spread = FeedModel {
        peaks: Vec::new(),
        ..timer
    };
    let level = document_level(&spread, &cfg, 7.0, true);
    assert!((6..40).contains(&level), "{level}");
}

/// The optimal allocator's start score for `delay` splits a budget between a flat and a
/// peaked feed of the same daily total closer to their exact optimum than the constant-rate
/// closed form (which splits it evenly); the exact split is found by trying every split.
#[test]
fn start_score_splits_like_the_exact_curves() {
    use super::pattern::{expand, Smoothing};
    use super::planner::{closed_form_score, start_score, FeedModel};
    let n = 288;
    let flat_bins = vec![1.0f32; 24];
    let mut peak_bins = vec![0.0f32; 24];
    (peak_bins[13], peak_bins[14]) = (12.0, 12.0);
    let model = |bins: &Vec<f32>| FeedModel {
        weight: 1.0,
        post_bins: bins.clone(),
        peaks: Vec::new(),
        access_bins: vec![0.0; 24],
        min_level: 1,
        max_level: 288,
        host: None,
        document: None,
    };
    let (flat, peak) = (model(&flat_bins), model(&peak_bins));
    let curve = |bins: &Vec<f32>| -> Vec<f64> {
        let mut p = Vec::new();
        expand(bins, n, Smoothing::Linear, &mut p);
        let t = CostTable::new(Metric::Delay, &p, &[], 300.0);
        let mut s = ExactSolver::new();
        (0..=12)
            .map(|m| {
                if m == 0 {
                    f64::INFINITY
                } else {
                    s.solve(&t, m).cost
                }
            })
            .collect()
    };
    let (df, dp) = (curve(&flat_bins), curve(&peak_bins));
    let budget = 12usize;
    let exact_peak = (1..budget)
        .min_by(|&a, &b| (dp[a] + df[budget - a]).total_cmp(&(dp[b] + df[budget - b])))
        .unwrap() as f64;
    let share = |score: &dyn Fn(&FeedModel) -> f64| {
        budget as f64 * score(&peak) / (score(&peak) + score(&flat))
    };
    let closed = share(&|f| closed_form_score(f, Metric::Delay));
    let start = share(&|f| start_score(f, Metric::Delay));
    assert!(
        (closed - 6.0).abs() < 1e-9,
        "the closed form splits evenly: {closed}"
    );
    assert!(
        exact_peak <= 4.0,
        "the peaked feed needs fewer fetches: {exact_peak}"
    );
    assert!(
        (start - exact_peak).abs() < 1.5
            && (start - exact_peak).abs() < (closed - exact_peak).abs(),
        "start {start:.2}, closed form {closed:.2}, exact {exact_peak}"
    );
}

/// A feed on a timer: nine tenths of its postings between 04:15 and 04:30, the rest spread
/// evenly. With one fetch a day the exact plan fetches as the window closes; the same bins
/// without the peak leave every minute equally good, and a brute-force check over every
/// slot agrees with the solver on the peak's best time.
#[test]
fn a_peak_draws_the_fetch_to_the_end_of_its_window() {
    use super::alloc::Level;
    use super::pattern::Peak;
    use super::pattern::Smoothing;
    use super::planner::{solve, FeedModel, PlanConfig, Policy, Scheduler};
    let feed = |peaks: Vec<Peak>| FeedModel {
        weight: 1.0,
        post_bins: vec![1.0 / 24.0; 24],
        access_bins: vec![0.0; 24],
        min_level: peaks.len().max(1) as Level,
        max_level: peaks.len().max(1) as Level,
        peaks,
        host: None,
        document: None,
    };
    let cfg = PlanConfig {
        metric: Metric::Delay,
        policy: Policy::Optimal,
        scheduler: Scheduler::Exact,
        slots: 1440,
        period_seconds: 86_400.0,
        budget: 1.0,
        host_caps: Default::default(),
        smoothing: Smoothing::Linear,
        day_prices: Default::default(),
        slot_capacity: None,
    };
    let peak = Peak {
        start: (4.25 / 24.0) as f32,
        width: (0.25 / 24.0) as f32,
        share: 0.9,
    };
    let plan = solve(&[feed(vec![peak])], &cfg).unwrap();
    let slot = plan.feeds[0].slots[0] as usize;
    assert_eq!(plan.feeds[0].slots.len(), 1);
    let mut p = Vec::new();
    feed(vec![peak]).expand_posts(&cfg, &mut p);
    let table = CostTable::new(Metric::Delay, &p, &[], 60.0);
    let best = (0..1440)
        .min_by(|&a, &b| table.cost(a, a + 1440).total_cmp(&table.cost(b, b + 1440)))
        .unwrap();
    assert_eq!(slot, best);
    assert!((270..=271).contains(&slot), "fetch at minute {slot}");
    // Postings wait about 8 minutes on average instead of the flat feed's 12 hours.
    let wait = table.cost(slot, slot + 1440) / 60.0;
    assert!(wait < 0.9 * 7.5 + 0.1 * 720.0 + 1.0, "{wait} min");
    let flat = solve(&[feed(vec![])], &cfg).unwrap();
    assert!((flat.expected_cost - 720.0 * 60.0).abs() < 60.0 * 5.0);
    // A morning and an evening digest (04:15-04:30 and 16:40-16:55, 45% of the postings
    // each) and two fetches a day: one just after each window, as every pair of minutes
    // tried agrees.
    let evening = Peak {
        start: (16.0 / 24.0 + 40.0 / 1440.0) as f32,
        share: 0.45,
        ..peak
    };
    let two = feed(vec![
        Peak {
            share: 0.45,
            ..peak
        },
        evening,
    ]);
    let cfg2 = PlanConfig {
        budget: 2.0,
        ..cfg.clone()
    };
    let plan = solve(std::slice::from_ref(&two), &cfg2).unwrap();
    let mut got: Vec<usize> = plan.feeds[0].slots.iter().map(|&s| s as usize).collect();
    got.sort_unstable();
    let mut p = Vec::new();
    two.expand_posts(&cfg, &mut p);
    let table = CostTable::new(Metric::Delay, &p, &[], 60.0);
    let pair = |a: usize, b: usize| table.cost(a, b) + table.cost(b, a + 1440);
    let (mut best, mut best_cost) = ((0, 0), f64::INFINITY);
    for a in 0..1440 {
        for b in a + 1..1440 {
            let c = pair(a, b);
            if c < best_cost {
                (best, best_cost) = ((a, b), c);
            }
        }
    }
    assert_eq!((got[0], got[1]), best);
    assert!(
        (270..=271).contains(&got[0]) && (1015..=1016).contains(&got[1]),
        "fetches at minutes {got:?}"
    );
}
