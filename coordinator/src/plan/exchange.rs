//! The greedy exchange behind the optimal allocation, with its cost-curve cache.
//!
//! State: each feed's level, the known points of its cost curve, and two heaps of one-step
//! moves (best gain per unit rate up, smallest loss per unit rate down). A move is taken
//! when free budget allows it, or when the best gain beats the summed losses of the
//! cheapest steps that pay for it. Curve points are expensive (an exact solve each), so a
//! feed whose neighbouring points are unknown is parked as *pending*; when no move is left
//! among the known points, all pending points are evaluated in one parallel batch and the
//! search resumes. It ends when no move exists and nothing is pending, i.e. every feed's
//! neighbours are known and no exchange improves the total — the optimality condition for
//! convex curves, whatever order the moves were taken in.

use super::alloc::{level_rate, AllocStats, Allocator, Level, EPS};
use rayon::prelude::*;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// One evaluated point of a feed's cost curve.
#[derive(Clone, Debug)]
pub struct CurvePoint {
    /// Weighted expected cost per period at this level.
    pub cost: f64,
    /// The optimal fetch boundaries at this level (one for sub-period levels).
    pub slots: Box<[u32]>,
}

impl CurvePoint {
    /// A point with no schedule attached (for callers that only price levels).
    pub fn cost_only(cost: f64) -> Self {
        CurvePoint {
            cost,
            slots: Box::default(),
        }
    }
}

/// Known points of one feed's cost curve.
#[derive(Clone, Debug)]
pub struct CurveCache {
    base: Level,
    points: Vec<Option<CurvePoint>>,
    /// Set when two evaluated neighbouring steps violate convexity.
    pub nonconvex: bool,
}

impl CurveCache {
    /// An empty cache.
    pub fn new() -> Self {
        CurveCache {
            base: 0,
            points: Vec::new(),
            nonconvex: false,
        }
    }

    /// The point at `l`, if evaluated.
    pub fn get(&self, l: Level) -> Option<&CurvePoint> {
        let i = l.checked_sub(self.base)?;
        if i < 0 {
            return None;
        }
        self.points.get(i as usize)?.as_ref()
    }

    fn cost(&self, l: Level) -> Option<f64> {
        self.get(l).map(|p| p.cost)
    }

    /// Records the point at `l`.
    pub fn set(&mut self, l: Level, p: CurvePoint) {
        if self.points.is_empty() {
            self.base = l;
        }
        if l < self.base {
            let shift = (self.base - l) as usize;
            let mut v: Vec<Option<CurvePoint>> = (0..shift).map(|_| None).collect();
            v.append(&mut self.points);
            self.points = v;
            self.base = l;
        }
        let i = (l - self.base) as usize;
        if i >= self.points.len() {
            self.points.resize_with(i + 1, || None);
        }
        self.points[i] = Some(p);
    }

    /// Drops every point except the one at `keep` (memory after the search is done).
    pub fn retain_only(&mut self, keep: Level) {
        let kept = self.get(keep).cloned();
        self.points.clear();
        if let Some(p) = kept {
            self.set(keep, p);
        }
    }
}

impl Default for CurveCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Levels and statistics from the exchange.
pub struct ExchangeResult {
    /// The chosen level of each feed.
    pub levels: Vec<Level>,
    /// What the search did.
    pub stats: AllocStats,
}

/// A candidate one-step move in the exchange heaps.
#[derive(Clone, Debug)]
struct Move {
    /// Ordering key: gain per unit rate (ups) or minus loss per unit rate (downs).
    value: f64,
    feed: usize,
    version: u32,
    /// Absolute gain (ups) or loss (downs) of the step.
    gain: f64,
    /// Rate change of the step.
    step: f64,
}

impl PartialEq for Move {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Move {}
impl PartialOrd for Move {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Move {
    fn cmp(&self, other: &Self) -> Ordering {
        // Deterministic ties: lower feed index first.
        self.value
            .total_cmp(&other.value)
            .then_with(|| other.feed.cmp(&self.feed))
    }
}

struct Exchange<'s, 'a> {
    alloc: &'s Allocator<'a>,
    levels: Vec<Level>,
    caches: &'s mut [CurveCache],
    used: f64,
    host_used: HashMap<u32, f64>,
    version: Vec<u32>,
    ups: BinaryHeap<Move>,
    downs: BinaryHeap<Move>,
    /// Feeds whose up-move is blocked by a full host, by host.
    blocked: HashMap<u32, Vec<usize>>,
    /// Feeds waiting for curve points.
    pending: Vec<usize>,
    is_pending: Vec<bool>,
    stats: AllocStats,
}

impl Allocator<'_> {
    /// Greedy exchange from `levels`, reusing (and extending) `caches` of known points.
    /// Incremental replans call it with mostly valid caches.
    pub fn exchange<E>(
        &self,
        levels: Vec<Level>,
        caches: &mut [CurveCache],
        eval: &E,
    ) -> ExchangeResult
    where
        E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
    {
        let n = levels.len();
        let mut x = Exchange {
            alloc: self,
            used: levels.iter().map(|&l| level_rate(l)).sum(),
            host_used: self.host_usage(&levels),
            levels,
            caches,
            version: vec![0; n],
            ups: BinaryHeap::new(),
            downs: BinaryHeap::new(),
            blocked: HashMap::new(),
            pending: Vec::new(),
            is_pending: vec![false; n],
            stats: AllocStats::default(),
        };
        for i in 0..n {
            x.push(i);
        }
        loop {
            x.make_moves();
            if x.pending.is_empty() {
                break;
            }
            x.evaluate_pending(eval);
        }
        x.stats.nonconvex_feeds = x.caches.iter().filter(|c| c.nonconvex).count();
        ExchangeResult {
            levels: x.levels,
            stats: x.stats,
        }
    }
}

impl Exchange<'_, '_> {
    /// The levels whose points feed `i` needs: its own and its neighbours within bounds.
    fn needed(&self, i: usize) -> impl Iterator<Item = Level> + '_ {
        let (l, f) = (self.levels[i], &self.alloc.feeds[i]);
        [l - 1, l, l + 1]
            .into_iter()
            .filter(move |&x| x >= f.min && x <= f.max)
    }

    /// Queues feed `i`'s moves, or parks it as pending if a needed point is unknown.
    fn push(&mut self, i: usize) {
        if self.needed(i).any(|l| self.caches[i].cost(l).is_none()) {
            if !self.is_pending[i] {
                self.is_pending[i] = true;
                self.pending.push(i);
            }
            return;
        }
        let (l, f) = (self.levels[i], &self.alloc.feeds[i]);
        let cache = &self.caches[i];
        let here = cache.cost(l).unwrap_or(f64::NAN);
        let mut up_value = None;
        if l < f.max {
            let step = level_rate(l + 1) - level_rate(l);
            let gain = here - cache.cost(l + 1).unwrap_or(f64::NAN);
            up_value = Some(gain / step);
            self.ups.push(Move {
                value: gain / step,
                feed: i,
                version: self.version[i],
                gain,
                step,
            });
        }
        if l > f.min {
            let step = level_rate(l) - level_rate(l - 1);
            let loss = cache.cost(l - 1).unwrap_or(f64::NAN) - here;
            self.downs.push(Move {
                value: -loss / step,
                feed: i,
                version: self.version[i],
                gain: loss,
                step,
            });
            if up_value.is_some_and(|up| up > loss / step + EPS * (1.0 + here.abs())) {
                self.caches[i].nonconvex = true;
            }
        }
    }

    /// Evaluates every missing point of the pending feeds in parallel, then re-queues them.
    fn evaluate_pending<E>(&mut self, eval: &E)
    where
        E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
    {
        let pending = std::mem::take(&mut self.pending);
        // One work item per feed, so its levels share a cost table and the solver's phase 1.
        let work: Vec<(usize, Vec<Level>)> = pending
            .iter()
            .map(|&i| {
                (
                    i,
                    self.needed(i)
                        .filter(|&l| self.caches[i].cost(l).is_none())
                        .collect::<Vec<_>>(),
                )
            })
            .filter(|(_, ls)| !ls.is_empty())
            .collect();
        let points: Vec<Vec<CurvePoint>> = work.par_iter().map(|(i, ls)| eval(*i, ls)).collect();
        for ((i, ls), ps) in work.iter().zip(points) {
            assert_eq!(ls.len(), ps.len(), "one curve point per level asked");
            self.stats.evaluations += ps.len();
            for (&l, p) in ls.iter().zip(ps) {
                self.caches[*i].set(l, p);
            }
        }
        for i in pending {
            self.is_pending[i] = false;
            self.version[i] += 1;
            self.push(i);
        }
    }

    /// Applies one step of feed `i` (+1 or −1 level) and re-queues it.
    fn apply(&mut self, i: usize, up: bool) {
        let l = self.levels[i];
        let step = if up {
            level_rate(l + 1) - level_rate(l)
        } else {
            level_rate(l - 1) - level_rate(l)
        };
        self.levels[i] = if up { l + 1 } else { l - 1 };
        self.used += step;
        self.version[i] += 1;
        if let Some(h) = self.alloc.feeds[i].host {
            *self.host_used.entry(h).or_default() += step;
            if !up {
                // Budget freed on this host: its blocked feeds may step up again.
                for j in self.blocked.remove(&h).unwrap_or_default() {
                    self.version[j] += 1;
                    self.push(j);
                }
            }
        }
        self.push(i);
    }

    /// Takes improving moves among feeds whose points are known, until none is left.
    fn make_moves(&mut self) {
        let budget = self.alloc.budget;
        loop {
            // Drop stale and host-blocked tops.
            while let Some(top) = self.ups.peek() {
                if top.version != self.version[top.feed] {
                    self.ups.pop();
                } else if !self.alloc.host_fits(&self.host_used, top.feed, top.step) {
                    let t = self.ups.pop().expect("peeked");
                    let host = self.alloc.feeds[t.feed].host.unwrap_or(0);
                    self.blocked.entry(host).or_default().push(t.feed);
                } else {
                    break;
                }
            }
            let Some(up) = self.ups.peek().cloned() else {
                return;
            };
            // Losers to take budget from: cheapest per unit first, as many as the step
            // needs (sub-period steps free less than one fetch each).
            let mut losers: Vec<Move> = Vec::new();
            if !(self.used + up.step <= budget + EPS && up.gain > 0.0) {
                let (mut freed, mut loss) = (0.0, 0.0);
                let mut skipped = Vec::new();
                while self.used - freed + up.step > budget + EPS {
                    let Some(d) = self.downs.pop() else { break };
                    if d.version != self.version[d.feed] {
                        continue;
                    }
                    if d.feed == up.feed || losers.iter().any(|l| l.feed == d.feed) {
                        skipped.push(d);
                        continue;
                    }
                    freed += d.step;
                    loss += d.gain;
                    losers.push(d);
                }
                let tol = EPS * (1.0 + up.gain.abs().max(loss.abs()));
                let fits = self.used - freed + up.step <= budget + EPS;
                let worth = up.gain > loss + tol;
                self.downs.extend(skipped);
                if !(fits && worth) || losers.is_empty() {
                    self.downs.extend(losers);
                    return;
                }
            }
            for loser in losers {
                self.apply(loser.feed, false);
            }
            self.apply(up.feed, true);
            self.stats.exchanges += 1;
        }
    }
}
