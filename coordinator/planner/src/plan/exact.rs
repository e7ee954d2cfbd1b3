//! Exact optimal m-fetch schedule on the cyclic slot grid.
//!
//! # Problem
//! Choose `m` distinct boundaries `x_0 < … < x_{m−1}` in `[0, N)` minimizing
//! `Σ_i cost(x_i, x_{i+1})` with `x_m = x_0 + N`. All three metrics' interval costs satisfy
//! the quadrangle (Monge) inequality `c(a,c) + c(b,d) ≤ c(a,d) + c(b,c)` for `a ≤ b ≤ c ≤ d`
//! (see `DESIGN.md` §3), which this solver relies on twice.
//!
//! # Phases
//! 1. **Anchored DP.** With one fetch pinned at boundary `s`, the best path
//!    `s → x_1 → … → s + N` is an m-link shortest path. For Monge costs the leftmost optimal
//!    predecessor of `x` is non-decreasing in `x`, so each DP layer is filled by
//!    divide & conquer in `O(W log W)` for a layer of width `W`, instead of `O(W²)`.
//!    For `delay` and `miss` the cost splits into a line per predecessor evaluated at a
//!    point that grows with `x` ([`CostTable::has_line_form`]), and a layer is filled in
//!    `O(W)` by the convex hull trick. Several fetch counts share one anchor-0 DP
//!    ([`ExactSolver::solve_levels`]), as the allocation needs `m − 1`, `m`, `m + 1`.
//! 2. **Anchor search by interleaving.** For Monge costs, optimal anchored solutions for
//!    different anchors can be chosen to interleave: if `X` is optimal for anchor `x_0`,
//!    some global optimum has a point in every gap `[x_j, x_{j+1}]`, and the solution for
//!    any anchor in that gap has its `i`-th point in `[x_{j+i}, x_{j+i+1}]`. So only anchors
//!    in the *shortest* gap of `X` (at most `N/m` of them) need trying, and solving the
//!    middle anchor first splits the point ranges for the two halves (divide & conquer
//!    over anchors). Each level of that recursion touches about `N` boundaries in total.
//!    Sub-ranges of anchors are skipped when a lower bound (the gaps between consecutive
//!    point ranges, and the solved neighbouring anchors' costs minus how much shifting the
//!    anchor can save) already reaches the best cost found, and the anchors at either end of
//!    a range whose own bound (the same terms at that one anchor) reaches it are dropped.
//!
//! The result is the exact optimum at slot resolution; `brute.rs` and the property tests
//! check it against exhaustive enumeration on small grids.

use super::cost::CostTable;

/// A cyclic schedule: sorted fetch boundaries in `[0, N)` and its expected cost per period.
#[derive(Clone, Debug, PartialEq)]
pub struct SlotSchedule {
    /// Fetch boundaries, strictly increasing, each in `[0, N)`.
    pub slots: Vec<u32>,
    /// Expected cost per period under the table's metric.
    pub cost: f64,
}

/// Reusable buffers for the anchored DP, so a batch of solves allocates once per thread.
#[derive(Default)]
pub struct ExactSolver {
    lo: Vec<usize>,
    hi: Vec<usize>,
    /// Per-layer offsets into `f` and `arg`.
    off: Vec<usize>,
    f: Vec<f64>,
    arg: Vec<u32>,
    /// Point-range buffers of the anchor being solved.
    range_lo: Vec<usize>,
    range_hi: Vec<usize>,
    /// Divide & conquer work stack, reused across layers.
    dc_stack: Vec<(usize, usize, usize, usize)>,
    /// Lower envelope for the line-form fill, reused across layers.
    hull: Vec<Line>,
}

impl ExactSolver {
    /// A solver with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The optimal schedule with `m` fetches per period (`m` is clamped to `[1, N]`).
    pub fn solve(&mut self, table: &CostTable, m: usize) -> SlotSchedule {
        self.solve_levels(table, &[m])
            .pop()
            .expect("one schedule per count")
    }

    /// Optimal schedules for several fetch counts of one feed (each clamped to `[1, N]`),
    /// in the order given. Phase 1 is shared: one anchored DP with as many layers as the
    /// largest count yields the anchor-0 optimum of every count.
    pub fn solve_levels(&mut self, table: &CostTable, ms: &[usize]) -> Vec<SlotSchedule> {
        let n = table.n();
        let ms: Vec<usize> = ms.iter().map(|&m| m.clamp(1, n)).collect();
        let dp_counts = || ms.iter().copied().filter(|&m| m >= 2 && m < n);
        let mut anchored0: Vec<Option<(f64, Vec<usize>)>> = vec![None; ms.len()];
        if let (Some(top), Some(low)) = (dp_counts().max(), dp_counts().min()) {
            // Point i needs room for the points after it under the smallest count.
            let lo: Vec<usize> = (0..top).collect();
            let hi: Vec<usize> = (0..top)
                .map(|i| {
                    if i == 0 {
                        0
                    } else {
                        n - low.saturating_sub(i).max(1)
                    }
                })
                .collect();
            let filled = self.fill(table, 0, top, &lo, &hi);
            debug_assert!(
                filled,
                "the unrestricted anchored problem is always feasible"
            );
            for (k, &m) in ms.iter().enumerate() {
                if m >= 2 && m < n {
                    anchored0[k] = self.close(table, 0, m);
                }
            }
        }
        ms.iter()
            .zip(anchored0)
            .map(|(&m, a0)| {
                if m == n {
                    let slots: Vec<u32> = (0..n as u32).collect();
                    let cost = table.schedule_cost(&slots);
                    SlotSchedule { slots, cost }
                } else if m == 1 {
                    let mut best = (0usize, f64::INFINITY);
                    for s in 0..n {
                        let v = table.cost(s, s + n);
                        if v < best.1 {
                            best = (s, v);
                        }
                    }
                    SlotSchedule {
                        slots: vec![best.0 as u32],
                        cost: best.1,
                    }
                } else {
                    let (cost0, x) = a0.expect("anchor-0 optimum of every count ≥ 2");
                    self.finish(table, m, cost0, x)
                }
            })
            .collect()
    }

    /// Phase 2 for `m` fetches, from the anchor-0 optimum `x` of cost `cost0`.
    fn finish(&mut self, table: &CostTable, m: usize, cost0: f64, x: Vec<usize>) -> SlotSchedule {
        let n = table.n();
        // The shortest gap of X bounds the anchors worth trying.
        let mut xs: Vec<usize> = x.clone();
        xs.push(n);
        let j = (0..m).min_by_key(|&j| xs[j + 1] - xs[j]).unwrap_or(0);
        // Unwrapped bounds: the i-th point of any anchor in [x_j, x_{j+1}] lies in
        // [b_i, b_{i+1}], where b_i = x_{(j+i) mod m} shifted by N once it wraps.
        let b: Vec<usize> = (0..=m + 1)
            .map(|i| {
                let k = j + i;
                xs[k % m] + (k / m) * n
            })
            .collect();
        let mut best = (cost0, x);
        // Every anchor of the gap, both ends included (X is optimal for anchor 0 only, not
        // for its other points), except boundary 0 itself, already solved.
        let s_lo = if b[0] == 0 { 1 } else { b[0] };
        let s_hi = if b[1] == n { n - 1 } else { b[1] };
        // Divide & conquer from the gap's middle anchor. (Solving the gap's two ends first
        // bounds the anchors between them tightly, but each end costs a fill of about N
        // cells under X's bounds, and with the anchor-by-anchor bounds the search from the
        // middle fills 27% fewer cells in all, measured on 20,000 feeds.)
        self.anchor_search(
            table,
            m,
            s_lo,
            s_hi,
            &b[..=m],
            &b[1..=m + 1],
            (None, None),
            &mut best,
        );

        let mut slots: Vec<u32> = best.1.iter().map(|&p| (p % n) as u32).collect();
        slots.sort_unstable();
        SlotSchedule {
            slots,
            cost: best.0,
        }
    }

    /// The optimum for anchor `s` with its `i`-th point in `[lower_i, upper_i]`, as the cost
    /// and the points `x_0 = s, …, x_{m−1}, s + N` (the form the bounds take), or `None` if
    /// no schedule fits the bounds.
    fn solve_anchor(
        &mut self,
        table: &CostTable,
        m: usize,
        s: usize,
        lower: &[usize],
        upper: &[usize],
    ) -> Option<(f64, Vec<usize>)> {
        let n = table.n();
        // Point i: inside the bounds and leaving room for the points before and after it.
        let (mut lo, mut hi) = (
            std::mem::take(&mut self.range_lo),
            std::mem::take(&mut self.range_hi),
        );
        lo.clear();
        hi.clear();
        lo.resize(m + 1, s);
        hi.resize(m + 1, s);
        lo[m] = s + n;
        hi[m] = s + n;
        for i in 1..m {
            lo[i] = lower[i].max(s + i);
            hi[i] = upper[i].min(s + n - (m - i));
        }
        let solved = self.anchored(table, s, m, &lo, &hi);
        (self.range_lo, self.range_hi) = (lo, hi);
        solved.map(|(cost, mut pts)| {
            pts.push(s + n);
            (cost, pts)
        })
    }

    /// Keeps `pts` (with its trailing `s + N`) as the best schedule if it is cheaper.
    fn offer(best: &mut (f64, Vec<usize>), cost: f64, pts: &[usize]) {
        if cost < best.0 {
            best.0 = cost;
            best.1.clear();
            best.1.extend_from_slice(&pts[..pts.len() - 1]);
        }
    }

    /// Divide & conquer over anchors `s ∈ [s_lo, s_hi]`, whose `i`-th points are known to
    /// lie in `[lower_i, upper_i]` (index 0 is the anchor itself, index m its copy + N).
    /// `known` holds the solved anchors next to the range, `(anchor, cost)`, if any: the
    /// left one below `s_lo`, the right one above `s_hi`.
    #[allow(clippy::too_many_arguments)]
    fn anchor_search(
        &mut self,
        table: &CostTable,
        m: usize,
        mut s_lo: usize,
        mut s_hi: usize,
        lower: &[usize],
        upper: &[usize],
        known: Known,
        best: &mut (f64, Vec<usize>),
    ) {
        if s_lo > s_hi {
            return;
        }
        // Lower bound for every anchor in [s_lo, s_hi] (see [`AnchorBounds`]).
        let bounds = AnchorBounds::new(table, m, lower, upper, known);
        if bounds.range(s_lo, s_hi) >= best.0 {
            return;
        }
        // The range bound takes each term at its worst anchor; anchor by anchor the same
        // terms are tighter, so anchors at either end whose own bound reaches the best are
        // dropped before the split (the point ranges stay valid for the anchors left).
        while s_lo <= s_hi && bounds.at(s_lo) >= best.0 {
            s_lo += 1;
        }
        while s_hi > s_lo && bounds.at(s_hi) >= best.0 {
            s_hi -= 1;
        }
        if s_lo > s_hi {
            return;
        }
        let s = s_lo + (s_hi - s_lo) / 2;
        match self.solve_anchor(table, m, s, lower, upper) {
            Some((cost, mid)) => {
                Self::offer(best, cost, &mid);
                if s > s_lo {
                    self.anchor_search(
                        table,
                        m,
                        s_lo,
                        s - 1,
                        lower,
                        &mid,
                        (known.0, Some((s, cost))),
                        best,
                    );
                }
                self.anchor_search(
                    table,
                    m,
                    s + 1,
                    s_hi,
                    &mid,
                    upper,
                    (Some((s, cost)), known.1),
                    best,
                );
            }
            // No feasible path inside the bounds: this anchor is dominated; split without
            // tightening (ranges and solved neighbours stay valid for both halves).
            None => {
                if s > s_lo {
                    self.anchor_search(table, m, s_lo, s - 1, lower, upper, known, best);
                }
                self.anchor_search(table, m, s + 1, s_hi, lower, upper, known, best);
            }
        }
    }

    /// Best path `s = x_0 < x_1 < … < x_{m−1} < s + N` with `x_i ∈ [lo_i, hi_i]`.
    /// Returns its cost and points `x_0..x_{m−1}` (unwrapped), or `None` if infeasible.
    fn anchored(
        &mut self,
        table: &CostTable,
        s: usize,
        m: usize,
        lo: &[usize],
        hi: &[usize],
    ) -> Option<(f64, Vec<usize>)> {
        if !self.fill(table, s, m, lo, hi) {
            return None;
        }
        self.close(table, s, m)
    }

    /// Fills DP layers `0..layers` for anchor `s` (layer i = best i-link path from `s` to
    /// each `x ∈ [lo_i, hi_i]`). Returns false if some range is empty.
    fn fill(
        &mut self,
        table: &CostTable,
        s: usize,
        layers: usize,
        lo: &[usize],
        hi: &[usize],
    ) -> bool {
        let m = layers;
        self.lo.clear();
        self.hi.clear();
        self.off.clear();
        self.lo.push(s);
        self.hi.push(s);
        for i in 1..m {
            if lo[i] > hi[i] {
                return false;
            }
            self.lo.push(lo[i]);
            self.hi.push(hi[i]);
        }
        let mut total = 0;
        for i in 0..m {
            self.off.push(total);
            total += self.hi[i] - self.lo[i] + 1;
        }
        self.f.clear();
        self.f.resize(total, f64::INFINITY);
        self.arg.clear();
        self.arg.resize(total, 0);
        self.f[0] = 0.0;
        self.arg[0] = s as u32;
        for i in 1..m {
            let (xl, xr) = (self.lo[i], self.hi[i]);
            let (ol, or) = (self.lo[i - 1], self.hi[i - 1]);
            self.fill_layer(table, i, xl, xr, ol, or);
        }
        true
    }

    /// Closes the cycle at `s + N` from layer `m − 1` filled by [`Self::fill`]: the best
    /// `m`-point schedule's cost and points, or `None` if no path reaches the layer.
    fn close(&mut self, table: &CostTable, s: usize, m: usize) -> Option<(f64, Vec<usize>)> {
        let end = s + table.n();
        let last = m - 1;
        let mut best = (f64::INFINITY, usize::MAX);
        let (ylo, yhi) = (self.lo[last], self.hi[last]);
        let layer = &self.f[self.off[last]..=self.off[last] + yhi - ylo];
        if table.has_line_form() {
            let (t, k) = table.query(end);
            for (y, &fy) in (ylo..=yhi).zip(layer) {
                let (a, slope) = table.line(y);
                let v = fy + a + slope * t + k;
                if v < best.0 {
                    best = (v, y);
                }
            }
            // Same value as the cost form, clamped like `cost` (rounding can dip below 0).
            best.0 = best.0.max(0.0);
        } else {
            for (y, &fy) in (ylo..=yhi).zip(layer) {
                if fy.is_finite() {
                    let v = fy + table.cost(y, end);
                    if v < best.0 {
                        best = (v, y);
                    }
                }
            }
        }
        if best.1 == usize::MAX {
            return None;
        }
        let mut pts = Vec::with_capacity(m + 1);
        pts.resize(m, 0);
        pts[last] = best.1;
        for i in (1..m).rev() {
            let x = pts[i];
            pts[i - 1] = self.arg[self.off[i] + x - self.lo[i]] as usize;
        }
        debug_assert_eq!(pts[0], s);
        Some((best.0, pts))
    }

    /// Fills DP layer `i` for `x ∈ [xl, xr]` from predecessors `y ∈ [ol, or]`, `y < x`,
    /// using the monotonicity of the leftmost optimal predecessor.
    fn fill_layer(
        &mut self,
        table: &CostTable,
        i: usize,
        xl: usize,
        xr: usize,
        ol: usize,
        or: usize,
    ) {
        if table.has_line_form() {
            return self.fill_layer_lines(table, i, xl, xr, ol, or);
        }
        // Explicit stack instead of recursion: (x range, predecessor range).
        let mut stack = std::mem::take(&mut self.dc_stack);
        stack.clear();
        stack.push((xl, xr, ol, or));
        let (prev_off, prev_lo) = (self.off[i - 1], self.lo[i - 1]);
        let (cur_off, cur_lo) = (self.off[i], self.lo[i]);
        while let Some((a, b, ylo, yhi)) = stack.pop() {
            if a > b {
                continue;
            }
            let x = a + (b - a) / 2;
            let top = yhi.min(x.saturating_sub(1));
            let mut best = (f64::INFINITY, ylo);
            if x > 0 {
                for y in ylo..=top {
                    let fy = self.f[prev_off + y - prev_lo];
                    if !fy.is_finite() {
                        continue;
                    }
                    let v = fy + table.cost(y, x);
                    if v < best.0 {
                        best = (v, y);
                    }
                }
            }
            self.f[cur_off + x - cur_lo] = best.0;
            self.arg[cur_off + x - cur_lo] = best.1 as u32;
            if x > a {
                stack.push((a, x - 1, ylo, best.1));
            }
            stack.push((x + 1, b, best.1, yhi));
        }
        self.dc_stack = stack;
    }

    /// Layer fill for costs with a line form: each predecessor `y` is the line
    /// `F(y) + a(y) + s(y)·t`, slopes fall as `y` grows and queries `t(x)` rise with `x`,
    /// so a monotone lower envelope with a forward-moving pointer answers every `x` in
    /// amortized O(1) (the convex hull trick). Ties keep the leftmost predecessor, like
    /// the divide & conquer fill.
    fn fill_layer_lines(
        &mut self,
        table: &CostTable,
        i: usize,
        xl: usize,
        xr: usize,
        ol: usize,
        or: usize,
    ) {
        let (prev_off, prev_lo) = (self.off[i - 1], self.lo[i - 1]);
        let (cur_off, cur_lo) = (self.off[i], self.lo[i]);
        // Room for every predecessor; the envelope is `hull[..len]` and each entry is written
        // before it is read, so the buffer is only grown, never cleared (zeroing it for every
        // layer was a sixteenth of the fill).
        let mut hull = std::mem::take(&mut self.hull);
        let room = (or + 1).saturating_sub(ol);
        if hull.len() < room {
            hull.resize(
                room,
                Line {
                    a: 0.0,
                    s: 0.0,
                    from: 0.0,
                    y: 0,
                },
            );
        }
        // Layer i − 1 lies before layer i in `f`.
        let (before, cur) = self.f.split_at_mut(cur_off);
        let prev = &before[prev_off..];
        let cur_arg = &mut self.arg[cur_off..];
        let lines = table.lines();
        let (mut len, mut ptr) = (0usize, 0usize);
        let mut next = ol;
        for x in xl..=xr {
            // Predecessors strictly before x join the envelope in order of y.
            let stop = (or + 1).min(x);
            while next < stop {
                let fy = prev[next - prev_lo];
                if fy.is_finite() {
                    let l = &lines[next];
                    len = push_line(&mut hull, len, fy + l[0], l[1], next);
                }
                next += 1;
            }
            if len == 0 {
                continue; // F stays +∞: no predecessor yet.
            }
            ptr = ptr.min(len - 1);
            let (t, k) = (lines[x][2], lines[x][3]);
            while ptr + 1 < len && hull[ptr + 1].from < t {
                ptr += 1;
            }
            let best = hull[ptr];
            cur[x - cur_lo] = (best.at(t) + k).max(0.0);
            cur_arg[x - cur_lo] = best.y;
        }
        self.hull = hull;
    }
}

/// The solved anchors beside a range of the anchor search, `(anchor, cost)`: the left one
/// below the range, the right one above it.
type Known = (Option<(usize, f64)>, Option<(usize, f64)>);

/// Lower bounds on the optimum of anchors in a range of the anchor search, whose `i`-th
/// points lie in `[lower_i, upper_i]`.
struct AnchorBounds<'a> {
    table: &'a CostTable,
    m: usize,
    lower: &'a [usize],
    upper: &'a [usize],
    /// Cost of the gaps between the ranges of points 1 … m − 1 (the same for every anchor).
    inner: f64,
    known: Known,
}

impl<'a> AnchorBounds<'a> {
    /// The bounds of one range; the gaps between the inner points' ranges are summed once,
    /// since they are the same for every anchor.
    fn new(
        table: &'a CostTable,
        m: usize,
        lower: &'a [usize],
        upper: &'a [usize],
        known: Known,
    ) -> Self {
        // Unpriced: point i + 1 may sit anywhere in its range, at any price (all ≥ 0).
        let inner = (1..m - 1)
            .filter(|&i| upper[i] < lower[i + 1])
            .map(|i| table.unpriced(upper[i], lower[i + 1]))
            .sum();
        AnchorBounds {
            table,
            m,
            lower,
            upper,
            inner,
            known,
        }
    }

    /// A lower bound on the optimum of every anchor in `[s_lo, s_hi]`.
    ///
    /// Whatever the schedule, its interval i covers the gap between point i's highest and
    /// point i+1's lowest position, and interval costs only grow with the interval.
    ///
    /// From a solved neighbour at anchor `a` (left) or `b` (right): shifting an anchor's
    /// schedule to the neighbour's anchor gives a schedule for that anchor, so it costs at
    /// least the neighbour's optimum. The shift stretches the interval on one side of the
    /// anchor, by at most its growth at that point's extreme position, and shrinks the one on
    /// the other side, by at least its saving at that point's extreme position (both by the
    /// Monge inequality). Without the saving the bound is off by the first-order change of
    /// the cost, and near the best anchor, where that change is about zero, it prunes nothing.
    /// Each term is taken at its worst anchor of the range; [`Self::at`] takes one anchor.
    ///
    /// On a priced table ([`CostTable::new_priced`]) an interval ending on a dearer boundary
    /// can cost more than a longer one, so where a term ends at a point that moves over a
    /// range (a point's range, or the anchor's copy `s + N`), it is taken unpriced, plus the
    /// range's cheapest price for the anchor; terms whose two sides end at the same point
    /// keep their prices, which cancel.
    fn range(&self, s_lo: usize, s_hi: usize) -> f64 {
        let (t, m, lower, upper) = (self.table, self.m, self.lower, self.upper);
        let n = t.n();
        // The anchor's own price, paid by the interval that ends at its copy `s + N`.
        let anchor_price = t.min_price(s_lo, s_hi);
        let mut bound = self.inner + anchor_price;
        if s_hi < lower[1] {
            bound += t.unpriced(s_hi, lower[1]);
        }
        if upper[m - 1] < s_lo + n {
            bound += t.unpriced(upper[m - 1], s_lo + n);
        }
        if let Some((a, left)) = self.known.0 {
            if upper[m - 1] < a + n && a < lower[1] {
                let (u, p) = (upper[1], upper[m - 1]);
                // c(s, u) ≥ c(s_hi, u) for every anchor s ≤ s_hi (zero if s_hi reaches u).
                let rest = if s_hi < u { t.cost(s_hi, u) } else { 0.0 };
                // Moving the anchor from s down to a shortens (x_{m−1}, s + N) to end at a + N.
                let saved = t.unpriced(p, s_lo + n) + anchor_price - t.cost(p, a + n);
                bound = f64::max(bound, left - t.cost(a, u) + rest + saved);
            }
        }
        if let Some((b, right)) = self.known.1 {
            if b < lower[1] && upper[m - 1] < s_lo + n {
                let (l, x) = (lower[m - 1], lower[1]);
                // Moving the anchor from s up to b shortens (s, x_1) to start at b.
                let saved = t.cost(s_hi, x) - t.cost(b, x);
                bound = f64::max(
                    bound,
                    right - t.cost(l, b + n) + t.unpriced(l, s_lo + n) + anchor_price + saved,
                );
            }
        }
        bound
    }

    /// A lower bound on the optimum of anchor `s`.
    fn at(&self, s: usize) -> f64 {
        self.range(s, s)
    }
}

/// One predecessor's line in the convex hull trick, with the query point from which it is
/// strictly below the line before it on the envelope.
#[derive(Clone, Copy, Debug)]
struct Line {
    a: f64,
    s: f64,
    from: f64,
    y: u32,
}

impl Line {
    #[inline]
    fn at(&self, t: f64) -> f64 {
        self.a + self.s * t
    }
}

/// Appends the line `a + s·t` of predecessor `y`, whose slope is ≤ every slope in the
/// envelope `hull[..len]`, dropping lines that can no longer be the minimum anywhere; returns
/// the envelope's new length.
#[inline]
fn push_line(hull: &mut [Line], mut len: usize, a: f64, s: f64, y: usize) -> usize {
    while len > 0 {
        let last = hull[len - 1];
        if last.s == s {
            // Parallel: the lower one wins everywhere; on a tie keep the older (leftmost).
            if a < last.a {
                len -= 1;
                continue;
            }
            return len;
        }
        // The new line is below `last` for t beyond `cross`; `last` is useless if that
        // comes no later than `last` itself got below the line before it.
        let cross = (a - last.a) / (last.s - s);
        if cross <= last.from {
            len -= 1;
            continue;
        }
        hull[len] = Line {
            a,
            s,
            from: cross,
            y: y as u32,
        };
        return len + 1;
    }
    hull[0] = Line {
        a,
        s,
        from: f64::NEG_INFINITY,
        y: y as u32,
    };
    1
}

/// Convenience wrapper: the optimal `m`-fetch schedule with fresh buffers.
pub fn solve_exact(table: &CostTable, m: usize) -> SlotSchedule {
    ExactSolver::new().solve(table, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost::Metric;
    use proptest::prelude::*;

    /// The cyclic optimum by definition: every anchor's best path, unbounded, none pruned.
    fn every_anchor(table: &CostTable, m: usize) -> f64 {
        let n = table.n();
        let mut solver = ExactSolver::new();
        (0..n)
            .filter_map(|s| {
                let lo: Vec<usize> = (0..m).map(|i| s + i).collect();
                let hi: Vec<usize> = (0..m).map(|i| s + n - (m - i)).collect();
                solver.anchored(table, s, m, &lo, &hi).map(|(c, _)| c)
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// Grids too large for brute force, where the anchor search recurses deep enough for
    /// its pruning bounds to matter: smooth daily shapes (one or two peaks, as learned
    /// feeds have) and rough ones.
    fn shape() -> impl Strategy<Value = Vec<f64>> {
        (
            48usize..=240,
            0.0f64..1.0,
            0.05f64..0.3,
            0.0f64..1.0,
            0.0f64..1.5,
            any::<bool>(),
        )
            .prop_flat_map(|(n, c1, w, c2, h2, rough)| {
                proptest::collection::vec(0.0f64..1.0, n).prop_map(move |noise| {
                    (0..n)
                        .map(|i| {
                            let x = i as f64 / n as f64;
                            let bump = |c: f64, w: f64| {
                                let d = (x - c).abs().min(1.0 - (x - c).abs());
                                (-(d / w).powi(2) / 2.0).exp()
                            };
                            let smooth = 0.02 + bump(c1, w) + h2 * bump(c2, w * 1.5);
                            if rough {
                                smooth * 2.0 * noise[i]
                            } else {
                                smooth
                            }
                        })
                        .collect()
                })
            })
    }

    /// Hourly steps with hours at exactly zero, as a feed posting only in some hours or a
    /// flat prior gives after spreading: long runs of equal slots make many predecessors'
    /// lines meet at one point and many schedules cost the same, so the envelope's ties and
    /// the leftmost-predecessor rule the anchor search relies on are exercised.
    fn steps() -> impl Strategy<Value = Vec<f64>> {
        (2usize..=10, proptest::collection::vec(0u8..4, 24)).prop_map(|(per_hour, hours)| {
            hours
                .iter()
                .flat_map(|&h| std::iter::repeat_n(f64::from(h) * 0.5, per_hour))
                .collect()
        })
    }

    /// For postings `p` (accesses the same reversed), under each metric: the pruned search
    /// costs what the best of every anchor costs, and its slots cost what it says.
    fn search_matches_every_anchor(p: &[f64], m: usize, w: &[f64]) -> Result<(), TestCaseError> {
        for metric in [Metric::Delay, Metric::Miss, Metric::AccessDelay] {
            let q: Vec<f64> = p.iter().rev().copied().collect();
            let t = CostTable::new_priced(Default::default(), metric, p, &q, 60.0, w);
            let got = ExactSolver::new().solve(&t, m);
            let want = every_anchor(&t, m);
            let tol = 1e-9 * (1.0 + want.abs());
            prop_assert!(
                (got.cost - want).abs() <= tol,
                "{} m={} search {} every anchor {}",
                metric,
                m,
                got.cost,
                want
            );
            prop_assert!((t.schedule_cost(&got.slots) - got.cost).abs() <= tol);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(120))]

        #[test]
        fn plateaus_and_zero_hours_still_give_the_best_of_every_anchor(
            p in steps(),
            m in 2usize..=10,
        ) {
            prop_assume!(p.iter().any(|&x| x > 0.0));
            search_matches_every_anchor(&p, m, &[])?;
        }

        #[test]
        fn the_pruned_anchor_search_finds_the_best_of_every_anchor(
            p in shape(),
            m in 2usize..=10,
        ) {
            search_matches_every_anchor(&p, m, &[])?;
        }

        /// Prices per day of a weekly plan (seven runs, the cheapest free), of a size that
        /// moves fetches between days: the anchor search's bounds must not assume that a
        /// longer interval costs more, which a price on its end breaks.
        #[test]
        fn the_pruned_anchor_search_finds_the_best_of_every_anchor_with_day_prices(
            p in shape(),
            m in 2usize..=10,
            day in proptest::collection::vec(0.0f64..1.0, 7),
            scale in prop_oneof![Just(1.0), 0.0f64..50_000.0],
        ) {
            let n = p.len();
            let low = day.iter().fold(f64::INFINITY, |a, &b| a.min(b));
            let w: Vec<f64> = (0..n).map(|x| (day[x * 7 / n] - low) * scale).collect();
            search_matches_every_anchor(&p, m, &w)?;
        }
    }
}
