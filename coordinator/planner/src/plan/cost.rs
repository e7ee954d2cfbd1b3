//! Interval costs of the three metrics at slot resolution, each in O(1) from prefix sums.
//!
//! A period of length `T` is cut into `N` slots of length `h = T / N`. A feed's model is the
//! expected number of postings `p_j` and the expected (weighted) number of reader accesses
//! `q_j` falling in slot `j` per period; inside a slot both are spread uniformly. Fetches
//! happen on slot boundaries: boundary `k` is time `k·h`. Boundaries are "unwrapped": the
//! arrays are conceptually repeated, so an interval `[a, b)` with `a < N ≤ b` crosses
//! the end of the period.
//!
//! For the interval between consecutive fetches at `a < b` (`b ≤ a + N`):
//!
//! * `delay` (Sia, Cho & Cho): each posting waits until the fetch at `b`.
//!   `h·Σ_{j∈[a,b)} p_j (b − j − ½)`.
//! * `miss` (Sia et al.): each access at slot `k` misses the postings since `a`.
//!   `Σ_{k∈[a,b)} q_k (Σ_{j∈[a,k)} p_j + ½ p_k)` — inside one slot a posting precedes an
//!   access with probability ½.
//! * `access-delay` (He & Parker): the summed age of the missed postings at access time.
//!   `h·Σ_{k∈[a,b)} q_k (Σ_{j∈[a,k)} p_j (k − j) + p_k/6)` — two independent uniform points in
//!   one slot are `h/6` apart in expectation when ordered.
//!
//! Expanding the inner sums turns each cost into differences of a handful of prefix sums.
//!
//! A table may also carry a **price per boundary** `w_x ≥ 0` ([`CostTable::new_priced`]):
//! the interval `[a, b)` then costs `w_b` more, so a schedule costs its metric plus the
//! prices of its fetches. A weekly plan prices each day of the week so that its fetches
//! fall evenly on the days ([`super::days`]). A price on an interval's end keeps the
//! quadrangle inequality (both sides gain the same two prices) and, in the line form, adds
//! to `k(x)`; what does not survive is that a longer interval costs more, which the exact
//! solver's anchor bounds take into account ([`CostTable::unpriced`]).

/// The objective a schedule minimizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Expected delay of each posting until it is fetched (seconds × postings).
    Delay,
    /// Expected number of postings missed by reader accesses.
    Miss,
    /// Expected summed age (seconds) of the postings missed by reader accesses.
    AccessDelay,
}

impl Metric {
    /// All metrics, in the order the papers introduced them.
    pub const ALL: [Metric; 3] = [Metric::Delay, Metric::Miss, Metric::AccessDelay];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Delay => "delay",
            Metric::Miss => "miss",
            Metric::AccessDelay => "access-delay",
        }
    }

    /// Whether the metric depends on reader accesses at all.
    pub fn uses_access(self) -> bool {
        !matches!(self, Metric::Delay)
    }
}

impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "delay" => Ok(Metric::Delay),
            "miss" => Ok(Metric::Miss),
            "access-delay" => Ok(Metric::AccessDelay),
            other => Err(format!(
                "unknown metric `{other}` (expected delay, miss or access-delay)"
            )),
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Prefix sums at one boundary `k` (each sum over slots `i < k` of the doubled period).
///
/// Kept together so an interval cost touches two cache lines, not twelve.
#[derive(Clone, Copy, Debug, Default)]
struct Prefix {
    /// `Σ p_i`.
    c: f64,
    /// `Σ i·p_i`.
    dp: f64,
    /// `Σ q_i` (unused for `delay`).
    q: f64,
    /// `miss`: `Σ q_i C[i]`; `access-delay`: `Σ q_i (i·C[i] − Dp[i])`.
    e: f64,
    /// `access-delay`: `Σ i·q_i`.
    qk: f64,
    /// `Σ q_i p_i` (same-slot pairs).
    r: f64,
}

/// The buffers of a [`CostTable`], kept between tables so a batch of solves allocates once.
#[derive(Default)]
pub struct TableStorage {
    pre: Vec<Prefix>,
    lines: Vec<[f64; 4]>,
    price: Vec<f64>,
}

/// Prefix sums of one feed's model, answering any interval cost in O(1).
///
/// Arrays are built over `2N` slots (the period twice), so every interval `[a, b)` with
/// `a ≤ N` and `b ≤ a + N` is a plain difference of prefix sums.
#[derive(Clone, Debug)]
pub struct CostTable {
    metric: Metric,
    n: usize,
    slot_seconds: f64,
    pre: Vec<Prefix>,
    /// Line form per boundary, `[a, s, t, k]` (see [`Self::has_line_form`]); empty for
    /// `access-delay`. Precomputed because the solver reads each many times.
    lines: Vec<[f64; 4]>,
    /// Price of a fetch at each unwrapped boundary `0..=2N` (the period's prices twice);
    /// empty when the table prices nothing.
    price: Vec<f64>,
}

impl CostTable {
    /// Builds the table for `metric` from per-slot posting and access masses per period.
    ///
    /// `access` is ignored for `delay` and may be empty then; otherwise it must have the
    /// same length as `post`. Masses must be finite and non-negative.
    pub fn new(metric: Metric, post: &[f64], access: &[f64], slot_seconds: f64) -> Self {
        Self::new_in(TableStorage::default(), metric, post, access, slot_seconds)
    }

    /// [`Self::new`] in the storage of a table no longer needed ([`Self::into_storage`]):
    /// a plan builds a table at every curve point it solves, and each is some 230 KB at
    /// minute slots, so allocating them afresh churned the allocator (a twentieth of a
    /// solve's time went to page faults).
    pub fn new_in(
        storage: TableStorage,
        metric: Metric,
        post: &[f64],
        access: &[f64],
        slot_seconds: f64,
    ) -> Self {
        Self::new_priced(storage, metric, post, access, slot_seconds, &[])
    }

    /// [`Self::new_in`] with a price per boundary of the period (`price[x]` for a fetch at
    /// boundary `x`, in the metric's unit; finite and non-negative), added to every
    /// interval ending there. An empty `price` prices nothing.
    pub fn new_priced(
        storage: TableStorage,
        metric: Metric,
        post: &[f64],
        access: &[f64],
        slot_seconds: f64,
        price: &[f64],
    ) -> Self {
        let n = post.len();
        assert!(n > 0, "a period needs at least one slot");
        assert!(slot_seconds > 0.0 && slot_seconds.is_finite());
        if metric.uses_access() {
            assert_eq!(
                access.len(),
                n,
                "access pattern must have one value per slot"
            );
        }
        assert!(
            price.is_empty() || price.len() == n,
            "prices must have one value per slot"
        );
        let uses_access = metric.uses_access();
        let TableStorage {
            mut pre,
            mut lines,
            price: mut prices,
        } = storage;
        prices.clear();
        if !price.is_empty() {
            debug_assert!(price.iter().all(|w| *w >= 0.0 && w.is_finite()));
            prices.reserve(2 * n + 1);
            prices.extend_from_slice(price);
            prices.extend_from_slice(price);
            prices.push(price[0]);
        }
        pre.clear();
        pre.reserve(2 * n + 1);
        let mut acc = Prefix::default();
        pre.push(acc);
        for i in 0..2 * n {
            // The period twice over; a comparison, not a remainder (an integer division
            // per slot was a tenth of building the table).
            let j = if i < n { i } else { i - n };
            let p = post[j];
            debug_assert!(p >= 0.0 && p.is_finite());
            let fi = i as f64;
            if uses_access {
                let qi = access[j];
                debug_assert!(qi >= 0.0 && qi.is_finite());
                // These use the sums *before* slot i (C[i], Dp[i]).
                acc.e += match metric {
                    Metric::Miss => qi * acc.c,
                    _ => qi * (fi * acc.c - acc.dp),
                };
                acc.q += qi;
                acc.qk += fi * qi;
                acc.r += qi * p;
            }
            acc.c += p;
            acc.dp += fi * p;
            pre.push(acc);
        }
        lines.clear();
        if metric != Metric::AccessDelay {
            lines.extend(
                pre.iter()
                    .enumerate()
                    .map(|(i, p)| Self::line_form(metric, slot_seconds, i, p)),
            );
            // A price at the interval's end is part of k(x).
            for (l, w) in lines.iter_mut().zip(&prices) {
                l[3] += w;
            }
        }
        CostTable {
            metric,
            n,
            slot_seconds,
            pre,
            lines,
            price: prices,
        }
    }

    /// The table's buffers, for [`Self::new_in`] to build the next table in.
    pub fn into_storage(self) -> TableStorage {
        TableStorage {
            pre: self.pre,
            lines: self.lines,
            price: self.price,
        }
    }

    /// Whether the table prices fetches ([`Self::new_priced`]).
    pub fn is_priced(&self) -> bool {
        !self.price.is_empty()
    }

    /// The price of a fetch at unwrapped boundary `x ≤ 2N` (0 when nothing is priced).
    #[inline]
    pub fn price_at(&self, x: usize) -> f64 {
        if self.price.is_empty() {
            0.0
        } else {
            self.price[x]
        }
    }

    /// The lowest price of a fetch at the unwrapped boundaries `lo..=hi` (`hi ≤ 2N`).
    pub fn min_price(&self, lo: usize, hi: usize) -> f64 {
        if self.price.is_empty() || lo > hi {
            return 0.0;
        }
        self.price[lo..=hi.min(2 * self.n)]
            .iter()
            .fold(f64::INFINITY, |m, &w| m.min(w))
    }

    /// The prices of a schedule's fetches per period: `slots` in `[0, N)` fetched every
    /// `k` periods (each fetch's price over `k`). What [`Self::schedule_cost`] and
    /// [`Self::multi_period_cost`] add to the metric.
    pub fn price_of(&self, slots: &[u32], k: u32) -> f64 {
        let sum: f64 = slots.iter().map(|&x| self.price_at(x as usize)).sum();
        sum / f64::from(k.max(1))
    }

    /// Number of slots per period.
    pub fn n(&self) -> usize {
        self.n
    }

    /// The metric this table prices.
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// Slot length in seconds.
    pub fn slot_seconds(&self) -> f64 {
        self.slot_seconds
    }

    /// Expected postings per period.
    pub fn total_postings(&self) -> f64 {
        self.pre[self.n].c
    }

    /// Expected (weighted) accesses per period; zero for `delay`.
    pub fn total_accesses(&self) -> f64 {
        self.pre[self.n].q
    }

    /// Expected postings in the unwrapped slot range `[a, b)`.
    #[inline]
    pub fn postings_between(&self, a: usize, b: usize) -> f64 {
        self.pre[b].c - self.pre[a].c
    }

    /// Expected accesses in the unwrapped slot range `[a, b)` (zero for `delay`).
    #[inline]
    pub fn accesses_between(&self, a: usize, b: usize) -> f64 {
        self.pre[b].q - self.pre[a].q
    }

    /// Whether the cost splits as `cost(y, x) = k(x) + a(y) + s(y)·t(x)` with `s`
    /// non-increasing in `y` and `t` non-decreasing in `x` — true for `delay` (`t = x − ½`)
    /// and `miss` (`t = Q_x`). Then a DP layer is a lower envelope of lines (one per
    /// predecessor `y`) queried at increasing `t`, solvable in linear time.
    pub fn has_line_form(&self) -> bool {
        !matches!(self.metric, Metric::AccessDelay)
    }

    /// Predecessor `y`'s line: intercept `a(y)` and slope `s(y)` (see [`Self::has_line_form`]).
    #[inline]
    pub fn line(&self, y: usize) -> (f64, f64) {
        let l = &self.lines[y];
        (l[0], l[1])
    }

    /// Query point `t(x)` and offset `k(x)` of boundary `x` (see [`Self::has_line_form`]).
    #[inline]
    pub fn query(&self, x: usize) -> (f64, f64) {
        let l = &self.lines[x];
        (l[2], l[3])
    }

    /// Every boundary's line form `[a, s, t, k]` (see [`Self::line`] and [`Self::query`]).
    #[inline]
    pub fn lines(&self) -> &[[f64; 4]] {
        &self.lines
    }

    /// The line form of boundary `i` computed from the prefix sums.
    fn line_form(metric: Metric, slot_seconds: f64, i: usize, p: &Prefix) -> [f64; 4] {
        match metric {
            Metric::Delay => {
                let t = i as f64 - 0.5;
                [
                    slot_seconds * p.dp,
                    -slot_seconds * p.c,
                    t,
                    slot_seconds * (t * p.c - p.dp),
                ]
            }
            _ => [-p.e + p.c * p.q - 0.5 * p.r, -p.c, p.q, p.e + 0.5 * p.r],
        }
    }

    /// Expected cost of the interval between fetches at boundaries `a < b ≤ a + N`,
    /// with `b ≤ 2N`, and the price of the fetch at `b` if the table is priced.
    #[inline]
    pub fn cost(&self, a: usize, b: usize) -> f64 {
        self.unpriced(a, b) + self.price_at(b)
    }

    /// [`Self::cost`] without the price of the fetch at `b`: the metric alone, which
    /// grows with the interval.
    #[inline]
    pub fn unpriced(&self, a: usize, b: usize) -> f64 {
        debug_assert!(
            a < b && b <= a + self.n && b <= 2 * self.n,
            "bad interval {a}..{b}"
        );
        let (pa, pb) = (&self.pre[a], &self.pre[b]);
        let v = match self.metric {
            Metric::Delay => {
                self.slot_seconds * ((b as f64 - 0.5) * (pb.c - pa.c) - (pb.dp - pa.dp))
            }
            Metric::Miss => (pb.e - pa.e) - pa.c * (pb.q - pa.q) + 0.5 * (pb.r - pa.r),
            Metric::AccessDelay => {
                self.slot_seconds
                    * ((pb.e - pa.e) - pa.c * (pb.qk - pa.qk)
                        + pa.dp * (pb.q - pa.q)
                        + (pb.r - pa.r) / 6.0)
            }
        };
        // Cancellation in the prefix differences can leave a tiny negative number where
        // the true cost is zero; costs are sums of non-negative terms.
        v.max(0.0)
    }

    /// Total expected cost per period of a cyclic schedule given by sorted boundaries in
    /// `[0, N)`. An empty schedule has no cost defined; it returns `f64::INFINITY`.
    pub fn schedule_cost(&self, slots: &[u32]) -> f64 {
        let m = slots.len();
        if m == 0 {
            return f64::INFINITY;
        }
        let mut total = 0.0;
        for i in 0..m {
            let a = slots[i] as usize;
            let b = if i + 1 < m {
                slots[i + 1] as usize
            } else {
                slots[0] as usize + self.n
            };
            total += self.cost(a, b);
        }
        total
    }

    /// Expected cost per period of fetching once every `k` periods at boundary `a < N`.
    ///
    /// Postings of earlier periods in the cycle wait whole extra periods; the closed forms
    /// below sum those shifts over the `k` copies of the pattern (see the module docs).
    /// A priced table adds the fetch's price over `k`.
    pub fn multi_period_cost(&self, a: usize, k: u32) -> f64 {
        debug_assert!(k >= 1 && a < self.n);
        let base = self.unpriced(a, a + self.n);
        let price = self.price_at(a) / f64::from(k);
        if k == 1 {
            return base + price;
        }
        let kf = k as f64;
        let period = self.n as f64 * self.slot_seconds;
        let p_tot = self.total_postings();
        match self.metric {
            Metric::Delay => base + price + period * p_tot * (kf - 1.0) / 2.0,
            Metric::Miss => base + price + p_tot * self.total_accesses() * (kf - 1.0) / 2.0,
            Metric::AccessDelay => {
                let b = a + self.n;
                let q_tot = self.total_accesses();
                // Σ over all (posting, access) pairs in one copy of (t − x), unwrapped.
                let cross = self.slot_seconds
                    * (p_tot * (self.pre[b].qk - self.pre[a].qk)
                        - q_tot * (self.pre[b].dp - self.pre[a].dp));
                base + price
                    + cross * (kf - 1.0) / 2.0
                    + period * p_tot * q_tot * (kf * kf - 1.0) / 6.0
            }
        }
    }

    /// The best boundary and its per-period cost for one fetch every `k` periods.
    pub fn best_multi_period(&self, k: u32) -> (usize, f64) {
        let mut best = (0, f64::INFINITY);
        for a in 0..self.n {
            let v = self.multi_period_cost(a, k);
            if v < best.1 {
                best = (a, v);
            }
        }
        best
    }
}

/// Every metric's cost per period of one cyclic schedule (`[delay, miss, access-delay]`),
/// straight from the per-slot masses in one pass over the period: the sums each metric's
/// [`CostTable::schedule_cost`] gives, without building three tables of `2N` prefix sums
/// to read `m` intervals from each (pricing a plan's million schedules under every
/// metric spent more on those tables than on the pricing).
///
/// `slots` are sorted boundaries in `[0, N)` as in [`CostTable::schedule_cost`]; an empty
/// schedule costs `f64::INFINITY` under every metric. `access` may be empty (no readers:
/// the reader metrics cost 0).
pub fn schedule_costs(post: &[f64], access: &[f64], slot_seconds: f64, slots: &[u32]) -> [f64; 3] {
    let (n, m) = (post.len(), slots.len());
    if m == 0 || n == 0 {
        return [f64::INFINITY; 3];
    }
    let read = access.len() == n;
    let mut out = [0.0; 3];
    for (i, &start) in slots.iter().enumerate() {
        let a = start as usize;
        let b = slots
            .get(i + 1)
            .map_or(slots[0] as usize + n, |&x| x as usize);
        // Over the interval so far: postings `c` and their summed age in slots at the
        // current slot's start, `d` (each posting of slot j is k − j slots old at slot k).
        let (mut c, mut d, mut miss, mut age) = (0.0, 0.0, 0.0, 0.0);
        for k in a..b {
            let j = if k >= n { k - n } else { k };
            let p = post[j];
            if read {
                let q = access[j];
                miss += q * (c + 0.5 * p);
                age += q * (d + p / 6.0);
            }
            d += c + p;
            c += p;
        }
        out[0] += (slot_seconds * (d - 0.5 * c)).max(0.0);
        out[1] += miss;
        out[2] += slot_seconds * age;
    }
    out
}
