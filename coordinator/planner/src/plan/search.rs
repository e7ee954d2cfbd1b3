//! The papers' own scheduling methods, kept as baselines: uniform spacing and the
//! optimality-condition search ("exhaustive search with pruning").
//!
//! The search tries every pair of first two fetch points on the slot grid, derives each
//! following point from the metric's first-order optimality condition, and keeps the plan
//! only if the condition also closes the cycle. The conditions (rates evaluated at the
//! fetch boundary, `Λ`/`U` integrals of posting/access rates):
//!
//! * `delay` — TKDE eq. 3: `λ(τ_j)(τ_{j+1} − τ_j) = ∫_{τ_{j−1}}^{τ_j} λ`.
//! * `miss` — ICWSM eq. 2: `λ(τ_j) ∫_{τ_j}^{τ_{j+1}} u = u(τ_j) ∫_{τ_{j−1}}^{τ_j} λ`.
//! * `access-delay` — He & Parker eq. 6 with its sign slip corrected:
//!   `λ(τ_j) ∫_{τ_j}^{τ_{j+1}} (t − τ_j) u(t) dt = u(τ_j) ∫_{τ_{j−1}}^{τ_j} (τ_j − f) λ(f) df`.
//!
//! "Closes the cycle" is judged with an explicit tolerance in slots (`tol_slots`): the point
//! predicted after the last fetch must land within `tol_slots` of the first fetch one period
//! later, and the point predicted after the first fetch (from the last) within `tol_slots`
//! of the second. The papers leave this threshold unspecified; a tight one discards good
//! plans, which is why the exact solver exists.

use super::cost::{CostTable, Metric};
use super::exact::SlotSchedule;

/// `m` fetches spaced as evenly as the grid allows, starting at boundary `phase`.
pub fn uniform_slots(n: usize, m: usize, phase: usize) -> Vec<u32> {
    let m = m.clamp(1, n);
    let mut slots: Vec<u32> = (0..m)
        .map(|i| ((phase + (i * n + m / 2) / m) % n) as u32)
        .collect();
    slots.sort_unstable();
    slots.dedup();
    slots
}

/// Prefix sums over three copies of the period, so conditions can look past the wrap.
struct ConditionModel {
    metric: Metric,
    n: usize,
    p: Vec<f64>,
    q: Vec<f64>,
    c: Vec<f64>,
    dp: Vec<f64>,
    qs: Vec<f64>,
    qk: Vec<f64>,
}

impl ConditionModel {
    fn new(metric: Metric, post: &[f64], access: &[f64]) -> Self {
        let n = post.len();
        let len = 3 * n;
        let at = |v: &[f64], i: usize| if v.is_empty() { 0.0 } else { v[i % n] };
        let p: Vec<f64> = (0..len).map(|i| post[i % n]).collect();
        let q: Vec<f64> = (0..len).map(|i| at(access, i)).collect();
        let mut c = vec![0.0; len + 1];
        let mut dp = vec![0.0; len + 1];
        let mut qs = vec![0.0; len + 1];
        let mut qk = vec![0.0; len + 1];
        for i in 0..len {
            c[i + 1] = c[i] + p[i];
            dp[i + 1] = dp[i] + i as f64 * p[i];
            qs[i + 1] = qs[i] + q[i];
            qk[i + 1] = qk[i] + i as f64 * q[i];
        }
        ConditionModel {
            metric,
            n,
            p,
            q,
            c,
            dp,
            qs,
            qk,
        }
    }

    /// Rate at a boundary: mean of the two adjacent slots (rates are per slot).
    fn rate(v: &[f64], n: usize, tau: usize) -> f64 {
        let prev = if tau == 0 { v[n - 1] } else { v[tau - 1] };
        (prev + v[tau]) / 2.0
    }

    /// The condition's left side (a non-decreasing function of `x`) and its target, for
    /// the point after `tau` given the previous point `prev < tau`.
    fn target(&self, prev: usize, tau: usize) -> f64 {
        let lam_mass = self.c[tau] - self.c[prev];
        match self.metric {
            Metric::Delay => lam_mass,
            Metric::Miss => Self::rate(&self.q, self.n, tau) * lam_mass,
            Metric::AccessDelay => {
                let aged = (tau as f64 - 0.5) * lam_mass - (self.dp[tau] - self.dp[prev]);
                Self::rate(&self.q, self.n, tau) * aged
            }
        }
    }

    fn lhs(&self, tau: usize, x: usize) -> f64 {
        let lam = Self::rate(&self.p, self.n, tau);
        match self.metric {
            Metric::Delay => lam * (x - tau) as f64,
            Metric::Miss => lam * (self.qs[x] - self.qs[tau]),
            Metric::AccessDelay => {
                let w =
                    (self.qk[x] - self.qk[tau]) - (tau as f64 - 0.5) * (self.qs[x] - self.qs[tau]);
                lam * w
            }
        }
    }

    /// The grid point in `(tau, limit]` where the condition is closest to equality, or
    /// `None` if it cannot be met there (e.g. zero rate at `tau`).
    fn next(&self, prev: usize, tau: usize, limit: usize) -> Option<usize> {
        let target = self.target(prev, tau);
        let (mut lo, mut hi) = (tau + 1, limit);
        if lo > hi || self.lhs(tau, hi) < target {
            // The left side never reaches the target inside one period.
            return None;
        }
        // First x with lhs(x) >= target.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.lhs(tau, mid) >= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo > tau + 1 && (target - self.lhs(tau, lo - 1)) < (self.lhs(tau, lo) - target) {
            Some(lo - 1)
        } else {
            Some(lo)
        }
    }
}

/// Outcome of the papers' search.
#[derive(Clone, Debug)]
pub struct SearchOutcome {
    /// The best plan that closed the cycle, if any did.
    pub schedule: Option<SlotSchedule>,
    /// How many closing plans improved on the best found before them (pruned pairs and
    /// plans no better than the incumbent are not checked for closure).
    pub closed_plans: usize,
}

/// The papers' exhaustive search over the first two fetch points with pruning.
///
/// `O(N²·m·log N)`; used as a baseline and benchmarked against the exact solver.
pub fn condition_search(
    table: &CostTable,
    post: &[f64],
    access: &[f64],
    m: usize,
    tol_slots: usize,
) -> SearchOutcome {
    let n = table.n();
    let m = m.clamp(1, n);
    if m == 1 {
        // One fetch: the condition is a single equation in τ₁; exhaustive search is exact.
        let (a, cost) = (0..n)
            .map(|a| (a, table.cost(a, a + n)))
            .fold((0, f64::INFINITY), |b, x| if x.1 < b.1 { x } else { b });
        return SearchOutcome {
            schedule: Some(SlotSchedule {
                slots: vec![a as u32],
                cost,
            }),
            closed_plans: n,
        };
    }
    let model = ConditionModel::new(table.metric(), post, access);
    let mut best: Option<SlotSchedule> = None;
    let mut best_cost = f64::INFINITY;
    let mut closed = 0;
    let mut pts = Vec::with_capacity(m);
    for a in 0..n {
        let end = a + n;
        for b in a + 1..end {
            pts.clear();
            pts.push(a);
            pts.push(b);
            let mut partial = table.cost(a, b);
            let mut ok = partial < best_cost;
            while ok && pts.len() < m {
                let (prev, tau) = (pts[pts.len() - 2], pts[pts.len() - 1]);
                match model.next(prev, tau, end - 1) {
                    Some(x) => {
                        partial += table.cost(tau, x);
                        pts.push(x);
                        ok = partial < best_cost;
                    }
                    None => ok = false,
                }
            }
            if !ok {
                continue;
            }
            let last = pts[m - 1];
            let total = partial + table.cost(last, end);
            if total >= best_cost {
                continue;
            }
            // Closure: the condition at the last point must predict the first one period
            // on, and the condition at the first point (after the last) the second.
            let wrap_ok = model
                .next(pts[m - 2], last, end + tol_slots)
                .is_some_and(|x| x.abs_diff(end) <= tol_slots);
            let first_ok = model
                .next(last, end, end + n - 1)
                .is_some_and(|x| x.abs_diff(b + n) <= tol_slots);
            if wrap_ok && first_ok {
                closed += 1;
                best_cost = total;
                let slots = pts.iter().map(|&p| (p % n) as u32).collect();
                best = Some(SlotSchedule { slots, cost: total });
            }
        }
    }
    if let Some(s) = best.as_mut() {
        s.slots.sort_unstable();
    }
    SearchOutcome {
        schedule: best,
        closed_plans: closed,
    }
}
