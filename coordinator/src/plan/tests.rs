//! Tests of the planner's math: costs against their continuous definitions, the exact
//! solver against brute force, and the papers' worked examples.

use super::brute::solve_brute;
use super::cost::{CostTable, Metric};
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
