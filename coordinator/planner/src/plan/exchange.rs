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
    /// What the allocation minimizes: the weighted expected cost per period at this level,
    /// plus the priced postings its schedule is expected to lose ([`super::overflow`]).
    pub cost: f64,
    /// The weighted expected cost of the metric alone (what the plan reports).
    pub delay: f64,
    /// The optimal fetch boundaries at this level (one for sub-period levels).
    pub slots: Box<[u32]>,
}

impl CurvePoint {
    /// A point with no schedule attached (for callers that only price levels).
    pub fn cost_only(cost: f64) -> Self {
        CurvePoint {
            cost,
            delay: cost,
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

    /// Checks every run of three known neighbouring points for convexity in the rate
    /// (sets [`CurveCache::nonconvex`]); returns the flag.
    pub fn check_convex(&mut self) -> bool {
        let base = self.base;
        for k in 2..self.points.len() {
            let l = base + k as Level - 1;
            if let (Some(a), Some(b), Some(c)) =
                (&self.points[k - 2], &self.points[k - 1], &self.points[k])
            {
                let down = (a.cost - b.cost) / (level_rate(l) - level_rate(l - 1));
                let up = (b.cost - c.cost) / (level_rate(l + 1) - level_rate(l));
                if up > down + EPS * (1.0 + b.cost.abs()) {
                    self.nonconvex = true;
                }
            }
        }
        self.nonconvex
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
    /// The prices of the pricing that started it (empty from a bare exchange).
    pub prices: super::price::Prices,
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
    /// Steps below the feed's current level this move starts (0 for a queued move; deeper
    /// ones exist only while one exchange gathers several steps of one feed).
    depth: u8,
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

/// Up-moves set aside (unpayable) before a search for one improving move gives up.
const MAX_SET_ASIDE: usize = 256;

/// How many sub-period steps of one feed a single exchange may gather.
const SUB_PERIOD_DEPTH: Level = 8;

struct Exchange<'s, 'a> {
    alloc: &'s Allocator<'a>,
    levels: Vec<Level>,
    caches: &'s mut [CurveCache],
    used: f64,
    host_used: HashMap<u32, f64>,
    version: Vec<u32>,
    ups: BinaryHeap<Move>,
    downs: BinaryHeap<Move>,
    /// The same down-moves by capped host, for exchanges inside a full host.
    host_downs: HashMap<u32, BinaryHeap<Move>>,
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
            host_downs: HashMap::new(),
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
            prices: Default::default(),
        }
    }
}

impl Exchange<'_, '_> {
    /// The levels whose points feed `i` needs: its own and its neighbours within bounds.
    ///
    /// Below one fetch per period the points further down are wanted too (they are cheap,
    /// one closed-form pass each): their steps are small, and one exchange may need several
    /// of them from the same feed to pay for a whole fetch elsewhere.
    fn needed(&self, i: usize) -> impl Iterator<Item = Level> + '_ {
        let (l, f) = (self.levels[i], &self.alloc.feeds[i]);
        let low = if l <= 1 { l - SUB_PERIOD_DEPTH } else { l - 1 };
        (low..=l + 1).filter(move |&x| x >= f.min && x <= f.max)
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
                depth: 0,
            });
        }
        if l > f.min {
            let step = level_rate(l) - level_rate(l - 1);
            let loss = cache.cost(l - 1).unwrap_or(f64::NAN) - here;
            let down = Move {
                value: -loss / step,
                feed: i,
                version: self.version[i],
                gain: loss,
                step,
                depth: 0,
            };
            if let Some(h) = self.capped_host(i) {
                self.host_downs.entry(h).or_default().push(down.clone());
            }
            self.downs.push(down);
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

    /// The step below `d` (a down-move of its feed), if that point is known and allowed.
    fn deeper(&self, d: &Move) -> Option<Move> {
        let i = d.feed;
        let top = self.levels[i] - d.depth as Level - 1;
        let next = top - 1;
        if top > 1 || next < self.alloc.feeds[i].min {
            return None;
        }
        let cache = &self.caches[i];
        let loss = cache.cost(next)? - cache.cost(top)?;
        let step = level_rate(top) - level_rate(next);
        Some(Move {
            value: -loss / step,
            feed: i,
            version: self.version[i],
            gain: loss,
            step,
            depth: d.depth + 1,
        })
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
    ///
    /// An up-move that cannot be paid for is set aside and the next best is tried: with
    /// sub-period levels a small step may still fit in the leftover budget, or be paid by
    /// steps the bigger one could not use. Set-aside moves return after any applied move.
    fn make_moves(&mut self) {
        let mut aside: Vec<Move> = Vec::new();
        while self.make_move(&mut aside) {
            self.ups.extend(aside.drain(..));
        }
        self.ups.extend(aside);
    }

    /// Applies the best improving move, if there is one.
    fn make_move(&mut self, aside: &mut Vec<Move>) -> bool {
        let budget = self.alloc.budget;
        loop {
            // Drop stale and host-blocked tops.
            while let Some(top) = self.ups.peek() {
                if top.version != self.version[top.feed] {
                    self.ups.pop();
                } else if !self.alloc.host_fits(&self.host_used, top.feed, top.step) {
                    let t = self.ups.pop().expect("peeked");
                    if self.host_exchange(&t) {
                        self.stats.exchanges += 1;
                        return true;
                    }
                    let host = self.alloc.feeds[t.feed].host.unwrap_or(0);
                    self.blocked.entry(host).or_default().push(t.feed);
                } else {
                    break;
                }
            }
            if aside.len() >= MAX_SET_ASIDE {
                // The best ups cannot be paid for; the rest, worth less per unit, rarely can,
                // and retrying every one after each move would make the search quadratic.
                return false;
            }
            let Some(up) = self.ups.pop() else {
                return false;
            };
            // Losers to take budget from (sub-period steps free less than one fetch each).
            let mut losers: Vec<Move> = Vec::new();
            let mut extra_ups: Vec<Move> = Vec::new();
            if !(self.used + up.step <= budget + EPS && up.gain > 0.0) {
                let need = self.used + up.step - budget;
                let (candidates, skipped) = self.loser_candidates(up.feed, need, None);
                self.downs.extend(skipped);
                let chosen = cover(&candidates, need);
                let loss: f64 = chosen.iter().map(|&k| candidates[k].gain).sum();
                let freed: f64 = chosen.iter().map(|&k| candidates[k].step).sum();
                // What the cover frees beyond the need funds more steps up (one whole fetch
                // freed can pay for two half steps).
                let mut busy: Vec<usize> = chosen.iter().map(|&k| candidates[k].feed).collect();
                busy.push(up.feed);
                let riders = if chosen.is_empty() {
                    Vec::new()
                } else {
                    self.riders(freed - need, &busy)
                };
                let gain = up.gain + riders.iter().map(|m| m.gain).sum::<f64>();
                let tol = EPS * (1.0 + gain.abs().max(loss.abs()));
                let worth = !chosen.is_empty() && gain > loss + tol;
                if worth {
                    extra_ups = riders;
                } else {
                    self.ups.extend(riders);
                }
                let mut picked = vec![false; candidates.len()];
                if worth {
                    for &k in &chosen {
                        picked[k] = true;
                    }
                }
                for (k, m) in candidates.into_iter().enumerate() {
                    if picked[k] {
                        losers.push(m);
                    } else if m.depth == 0 {
                        self.downs.push(m);
                    }
                }
                if !worth {
                    aside.push(up);
                    continue;
                }
                // Steps of one feed are applied from the top down.
                losers.sort_by_key(|m| (m.feed, m.depth));
            }
            for loser in losers {
                self.apply(loser.feed, false);
            }
            self.apply(up.feed, true);
            for m in extra_ups {
                self.apply(m.feed, true);
            }
            self.stats.exchanges += 1;
            return true;
        }
    }
}

/// Candidate down-moves popped beyond what covers the need, so that a cover can end with a
/// small step instead of a whole one (the knapsack's overshoot).
const EXTRA_CANDIDATES: usize = 32;

impl Exchange<'_, '_> {
    /// Valid down-moves cheapest per unit first, until they free `need` and then
    /// [`EXTRA_CANDIDATES`] more; deeper steps of a feed follow its step above. Returns the
    /// candidates and the skipped queued moves (the up-feed's own) to put back.
    ///
    /// `host`: take them from that capped host's feeds only, else from all feeds.
    fn loser_candidates(
        &mut self,
        up_feed: usize,
        need: f64,
        host: Option<u32>,
    ) -> (Vec<Move>, Vec<Move>) {
        let mut candidates: Vec<Move> = Vec::new();
        let mut skipped = Vec::new();
        let mut taken: HashMap<usize, u8> = HashMap::new();
        let (mut freed, mut extra) = (0.0, 0);
        while freed < need - EPS || extra < EXTRA_CANDIDATES {
            let Some(d) = self.down_heap(host).pop() else {
                break;
            };
            if d.version != self.version[d.feed] {
                continue;
            }
            let expected = taken.get(&d.feed).copied().unwrap_or(0);
            // Stale deeper moves (from an earlier search) are dropped here.
            if d.depth != expected {
                if d.depth == 0 {
                    skipped.push(d);
                }
                continue;
            }
            if d.feed == up_feed {
                skipped.push(d);
                continue;
            }
            if freed >= need - EPS {
                extra += 1;
            }
            freed += d.step;
            taken.insert(d.feed, d.depth + 1);
            if let Some(next) = self.deeper(&d) {
                self.down_heap(host).push(next);
            }
            candidates.push(d);
        }
        (candidates, skipped)
    }
}

impl Exchange<'_, '_> {
    /// The capped host of feed `i`, if it has one.
    fn capped_host(&self, i: usize) -> Option<u32> {
        let h = self.alloc.feeds[i].host?;
        self.alloc.host_caps.cap(h).map(|_| h)
    }

    /// The queue of down-moves of `host` (a capped host), or of all feeds.
    fn down_heap(&mut self, host: Option<u32>) -> &mut BinaryHeap<Move> {
        match host {
            Some(h) => self.host_downs.entry(h).or_default(),
            None => &mut self.downs,
        }
    }

    /// An up-move blocked by its full host, paid for by steps down of the same host's feeds
    /// (they free room on the host and in the budget alike). Applies it if that lowers the
    /// total; the unused candidates go back to the host's queue.
    fn host_exchange(&mut self, up: &Move) -> bool {
        let Some(h) = self.capped_host(up.feed) else {
            return false;
        };
        let cap = self.alloc.host_caps.cap(h).unwrap_or(f64::INFINITY);
        if up.gain <= 0.0 {
            return false;
        }
        let on_host = self.host_used.get(&h).copied().unwrap_or(0.0);
        let need = (on_host + up.step - cap).max(self.used + up.step - self.alloc.budget);
        let (candidates, skipped) = self.loser_candidates(up.feed, need, Some(h));
        self.down_heap(Some(h)).extend(skipped);
        let chosen = cover(&candidates, need);
        let loss: f64 = chosen.iter().map(|&k| candidates[k].gain).sum();
        let freed: f64 = chosen.iter().map(|&k| candidates[k].step).sum();
        // What the cover frees beyond the need funds further steps up, on this host or
        // elsewhere: seen with the host's usage as it will be after the exchange.
        let riders = if chosen.is_empty() {
            Vec::new()
        } else {
            let shift = freed - up.step;
            *self.host_used.entry(h).or_default() -= shift;
            let mut busy: Vec<usize> = chosen.iter().map(|&k| candidates[k].feed).collect();
            busy.push(up.feed);
            let room = (freed - need).min(self.alloc.budget - (self.used - shift));
            let riders = self.riders(room, &busy);
            *self.host_used.entry(h).or_default() += shift;
            riders
        };
        let gain = up.gain + riders.iter().map(|m| m.gain).sum::<f64>();
        let worth = !chosen.is_empty() && gain > loss + EPS * (1.0 + gain.abs());
        if !worth {
            self.ups.extend(riders.iter().cloned());
        }
        let mut losers = Vec::new();
        for (k, m) in candidates.into_iter().enumerate() {
            if worth && chosen.contains(&k) {
                losers.push(m);
            } else if m.depth == 0 {
                self.down_heap(Some(h)).push(m);
            }
        }
        if !worth {
            return false;
        }
        losers.sort_by_key(|m| (m.feed, m.depth));
        for loser in losers {
            self.apply(loser.feed, false);
        }
        self.apply(up.feed, true);
        for m in riders {
            self.apply(m.feed, true);
        }
        true
    }

    /// Valid up-moves of feeds not in `busy` that fit in `room` (and their hosts), best per
    /// unit first, popped from the queue; the rest of what was looked at goes back.
    fn riders(&mut self, mut room: f64, busy: &[usize]) -> Vec<Move> {
        let mut riders: Vec<Move> = Vec::new();
        let mut back = Vec::new();
        let mut looked = 0;
        while room > EPS && looked < EXTRA_CANDIDATES {
            let Some(m) = self.ups.pop() else { break };
            if m.version != self.version[m.feed] {
                continue;
            }
            looked += 1;
            // Riders on one host share its room.
            let same_host: f64 = riders
                .iter()
                .filter(|r| {
                    r.feed != m.feed
                        && self.alloc.feeds[r.feed].host.is_some()
                        && self.alloc.feeds[r.feed].host == self.alloc.feeds[m.feed].host
                })
                .map(|r| r.step)
                .sum();
            let fits_host = self
                .alloc
                .host_fits(&self.host_used, m.feed, m.step + same_host);
            if m.step <= room + EPS
                && m.gain > 0.0
                && fits_host
                && !busy.contains(&m.feed)
                && !riders.iter().any(|r| r.feed == m.feed)
            {
                room -= m.step;
                riders.push(m);
            } else {
                back.push(m);
            }
        }
        self.ups.extend(back);
        riders
    }
}

/// The cheapest cover of `need` among `c` (in the order popped) found by: a prefix of the
/// per-unit order, completed by one later candidate that may follow it (a depth-0 move of a
/// feed not in the prefix, or the next step of a feed that is) and, if one step is not
/// enough, that feed's further steps. Indices into `c`; empty when nothing covers `need`.
fn cover(c: &[Move], need: f64) -> Vec<usize> {
    // Each candidate's next step of the same feed (the first one after it), found once in
    // a pass from the end: scanning for it inside the double loop made a search over many
    // small sub-period steps cubic (a replay at two fetches a day spent 96% of its time here).
    let mut next_step: Vec<Option<usize>> = vec![None; c.len()];
    let mut later: HashMap<(usize, u8), usize> = HashMap::with_capacity(c.len());
    for (x, m) in c.iter().enumerate().rev() {
        next_step[x] = m
            .depth
            .checked_add(1)
            .and_then(|d| later.get(&(m.feed, d)).copied());
        later.insert((m.feed, m.depth), x);
    }
    let mut best: Option<(f64, usize, Vec<usize>)> = None;
    let mut steps_in: HashMap<usize, u8> = HashMap::new();
    let (mut freed, mut loss) = (0.0, 0.0);
    for k in 0..=c.len() {
        if freed >= need - EPS {
            if best.as_ref().is_none_or(|b| loss < b.0) {
                best = Some((loss, k, Vec::new()));
            }
            break;
        }
        for (j, m) in c.iter().enumerate().skip(k) {
            if m.depth != steps_in.get(&m.feed).copied().unwrap_or(0) {
                continue;
            }
            // The chain of this feed's steps from `m` down, as far as the candidates go.
            let (mut f, mut l, mut chain) = (freed, loss, Vec::new());
            let mut next = Some(j);
            while let Some(x) = next {
                f += c[x].step;
                l += c[x].gain;
                chain.push(x);
                if best.as_ref().is_some_and(|b| l >= b.0) {
                    break;
                }
                if f >= need - EPS {
                    best = Some((l, k, chain.clone()));
                    break;
                }
                next = next_step[x];
            }
        }
        if k < c.len() {
            freed += c[k].step;
            loss += c[k].gain;
            *steps_in.entry(c[k].feed).or_default() += 1;
        }
    }
    match best {
        Some((_, k, tail)) => (0..k).chain(tail).collect(),
        None => Vec::new(),
    }
}
