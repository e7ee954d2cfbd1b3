//! A budget price for the allocation: the Lagrangian start of the exchange.
//!
//! With a price μ on each fetch per period, every feed independently takes the level that
//! minimizes `D_f(L) + μ · rate(L)`; for curves convex in the rate that level falls as μ
//! rises, so bisecting μ until the summed rate meets the budget gives the optimum of the
//! separable problem at the budget it spends (the convex hull of the knapsack). A host with a
//! cap has a price of its own, `π_h`, the lowest at which its feeds fit the cap; its feeds pay
//! `max(μ, π_h)`, so a full host rations its own fetches instead of blocking them.
//!
//! Why it is needed: the one-step exchange ([`super::exchange`]) compares one step up with
//! the cheapest steps down that pay for it. Sub-period steps are unequal (one fetch a day
//! → one every two days frees ½; every 6 → every 7 days frees 1/42), so a move that pays
//! for a whole fetch with many small steps, or that frees a whole fetch to fund two half
//! steps, is never seen, and the exchange stops far from the optimum when budgets fall below
//! a fetch per feed per period. Started from the priced levels, the exchange only has to
//! spend the leftover and polish.
//!
//! Curve points are evaluated lazily: a feed's walk toward its best level stops at the first
//! unknown point, all stopped feeds are evaluated in one parallel batch, and the walks
//! resume.

use super::alloc::{level_rate, Allocator, Level, EPS};
use super::exchange::{CurveCache, CurvePoint};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Factor by which the budget price's bracket grows from the first guess. Small: every level a
/// walk reaches at the bracket's ends is an exact solve, and the guess is usually close.
const BRACKET_STEP: f64 = 1.1;

/// Relative width at which a price bisection stops.
const PRECISION: f64 = 1e-10;

struct Pricer<'s, 'a, E> {
    alloc: &'s Allocator<'a>,
    levels: Vec<Level>,
    caches: &'s mut [CurveCache],
    eval: &'s E,
    evaluations: usize,
    /// Highest level each feed may reach (its own max, and a host cap alone).
    top: Vec<Level>,
    /// Each capped host's own price, once the host has been seen to bind.
    host_price: std::collections::HashMap<u32, f64>,
}

impl<E> Pricer<'_, '_, E>
where
    E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
{
    /// Moves every feed of `members` to its best level at its price. The walks run on
    /// every core (each reads only its own feed's curve), and so do the solves of the
    /// points they stopped at: at a million feeds the bisection settles every feed some
    /// thirty times, and walked one after another the walks alone held the solve to one
    /// core for a third of its time.
    fn settle(&mut self, members: &[usize], price: &(dyn Fn(usize) -> f64 + Sync)) {
        let mut todo: Vec<usize> = members.to_vec();
        while !todo.is_empty() {
            let walked: Vec<(Level, Option<Level>)> = {
                let (caches, levels, top, feeds) =
                    (&*self.caches, &self.levels, &self.top, &self.alloc.feeds);
                todo.par_iter()
                    .with_min_len(WALKS_PER_TASK)
                    .map(|&i| walk(&caches[i], feeds[i].min, top[i], levels[i], price(i)))
                    .collect()
            };
            let mut need: Vec<(usize, Vec<Level>)> = Vec::new();
            for (&i, (level, stopped)) in todo.iter().zip(walked) {
                self.levels[i] = level;
                if let Some(l) = stopped {
                    need.push((i, self.wanted(i, level, l, price(i))));
                }
            }
            let eval = self.eval;
            let points: Vec<Vec<CurvePoint>> =
                need.par_iter().map(|(i, ls)| eval(*i, ls)).collect();
            todo.clear();
            for ((i, ls), ps) in need.into_iter().zip(points) {
                self.evaluations += ps.len();
                for (l, p) in ls.into_iter().zip(ps) {
                    self.caches[i].set(l, p);
                }
                todo.push(i);
            }
        }
    }

    /// The levels to evaluate for feed `i`, whose walk from `level` stopped at the unknown
    /// level `l`: `l` and its neighbours (the walk usually goes on that way, and one solve
    /// shares its work across the levels of a feed), and, where the walk is climbing or
    /// descending through whole-fetch levels, every level on to where it is likely to stop.
    ///
    /// The exact solver's first phase is one DP with a layer per fetch, shared by all the
    /// levels of a call, and at ten fetches a period it costs as much as the second phase of
    /// three levels; a feed walking several levels used to pay it once per two. Where it
    /// stops is estimated from the last step it took (or refused): `delay` falls about as
    /// `K/m` with `m` fetches, so a step's gain falls as the square of its midpoint, and the
    /// walk stops where a step's gain meets the price. A walk does the same with the points
    /// it has; the bisection's price guesses ([`Self::marginal`]) read the neighbours that
    /// are known, so on curves that are not convex it can take another path.
    fn wanted(&self, i: usize, level: Level, l: Level, price: f64) -> Vec<Level> {
        let (min, top, cache) = (self.alloc.feeds[i].min, self.top[i], &self.caches[i]);
        let gain = |a: Level| match (cache.get(a), cache.get(a + 1)) {
            (Some(p), Some(q)) if p.cost > q.cost && price > 0.0 => Some(p.cost - q.cost),
            _ => None,
        };
        // The midpoint `m` of the step whose gain meets the price, from a step's gain `g` at
        // midpoint `at`.
        let meets = |g: f64, at: f64| at * (g / price).sqrt();
        let (mut lo, mut hi) = (l - 1, l + 1);
        if l == level + 1 && level >= 2 {
            if let Some(g) = gain(level - 1) {
                // The walk takes the step from `l` on if its midpoint `l + ½` is below `m`.
                let m = meets(g, level as f64 - 0.5);
                hi = if m < l as f64 + 0.5 - MARGIN {
                    l
                } else {
                    let reach = (m + 1.5).min((level + LOOK_AHEAD) as f64) as Level;
                    hi.max(reach.min(2 * level))
                };
            }
        } else if l == level - 1 && level >= 3 {
            if let Some(g) = gain(level) {
                // The walk steps down from `l` if that step's midpoint `l − ½` is above `m`.
                let m = meets(g, level as f64 + 0.5);
                lo = if m > l as f64 - 0.5 + MARGIN {
                    l
                } else {
                    let reach = (m - 1.5).max((level - LOOK_AHEAD) as f64).ceil() as Level;
                    lo.min(reach.max(level / 2).max(1))
                };
            }
        }
        (lo..=hi)
            .filter(|&x| x >= min && x <= top && cache.get(x).is_none())
            .collect()
    }

    /// The price at which feed `i` is indifferent around its level: the geometric mean of
    /// its gain per unit up and loss per unit down (whichever is known and positive).
    fn marginal(&self, i: usize) -> Option<f64> {
        let (l, c) = (self.levels[i], &self.caches[i]);
        let here = c.get(l)?.cost;
        let up = c
            .get(l + 1)
            .map(|p| (here - p.cost) / (level_rate(l + 1) - level_rate(l)));
        let down = c
            .get(l - 1)
            .map(|p| (p.cost - here) / (level_rate(l) - level_rate(l - 1)));
        match (up, down) {
            (Some(u), Some(d)) if u > 0.0 && d > 0.0 => Some((u * d).sqrt()),
            (Some(u), _) if u > 0.0 => Some(u),
            (_, Some(d)) if d > 0.0 => Some(d),
            _ => None,
        }
    }

    fn rate(&self, members: &[usize]) -> f64 {
        members.iter().map(|&i| level_rate(self.levels[i])).sum()
    }

    /// Settles a capped host's feeds at `max(mu, π_h)`, where `π_h` is the lowest price at
    /// which the host's feeds fit its cap. `π_h` does not depend on `mu`, so it is found once,
    /// the first time the host binds, by bisection upward from that `mu` (the walks then only
    /// move down from where they are); a host seen fitting at some price is known to fit at
    /// every higher one.
    fn settle_host(&mut self, h: u32, members: &[usize], mu: f64, cap: f64) {
        if let Some(&pi) = self.host_price.get(&h) {
            self.settle(members, &|_| mu.max(pi));
            return;
        }
        self.settle(members, &|_| mu);
        if self.rate(members) <= cap + EPS {
            return;
        }
        let (mut lo, mut hi) = (mu, mu.max(1e-300) * 1.5);
        loop {
            self.settle(members, &|_| hi);
            if self.rate(members) <= cap + EPS || hi > 1e300 {
                break;
            }
            lo = hi;
            hi *= 1.5;
        }
        while hi - lo > PRECISION * hi {
            let mid = 0.5 * (lo + hi);
            self.settle(members, &|_| mid);
            if self.rate(members) <= cap + EPS {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        self.settle(members, &|_| hi);
        self.host_price.insert(h, hi);
    }

    /// Every feed at its best level for the budget price `mu`; returns the summed rate.
    fn at(&mut self, mu: f64, groups: &Groups) -> f64 {
        self.settle(&groups.free, &|_| mu);
        for (&h, (members, cap)) in &groups.capped {
            self.settle_host(h, members, mu, *cap);
        }
        self.levels.iter().map(|&l| level_rate(l)).sum()
    }

    /// Whether lowering the budget price can still change anything: some feed is uncapped,
    /// or some capped host has not yet met its cap.
    fn can_spend_more(&self, groups: &Groups) -> bool {
        !groups.free.is_empty()
            || groups
                .capped
                .keys()
                .any(|h| !self.host_price.contains_key(h))
    }
}

/// Walks one feed toward the level minimizing `cost + price · rate`, from `from` within
/// `[min, max]`: the level reached, and the first unknown point on the way if it stopped
/// at one.
pub(crate) fn walk(
    cache: &CurveCache,
    min: Level,
    max: Level,
    from: Level,
    price: f64,
) -> (Level, Option<Level>) {
    let value = |l: Level| {
        cache
            .get(l)
            .map(|p| p.cost + price * level_rate(l))
            .ok_or(l)
    };
    let mut l = from.clamp(min, max);
    let result = (|| {
        let mut here = value(l)?;
        let mut moved_up = false;
        while l < max {
            let up = value(l + 1)?;
            // Strictly better only, and exact comparisons both ways: ties go to the
            // cheaper rate whichever side the walk starts from, so the level at a price
            // does not depend on the previous price's.
            if up < here {
                l += 1;
                here = up;
                moved_up = true;
            } else {
                break;
            }
        }
        if !moved_up {
            while l > min {
                let down = value(l - 1)?;
                if down <= here {
                    l -= 1;
                    here = down;
                } else {
                    break;
                }
            }
        }
        Ok(())
    })();
    (l, result.err())
}

/// Level steps between two allocations of the same feeds, summed over feeds.
fn steps_apart(a: &[Level], b: &[Level]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| u64::from(x.abs_diff(y)))
        .sum()
}

/// Levels beyond the walk's next step that one evaluation asks for at most.
const LOOK_AHEAD: Level = 8;

/// How far (in levels) the estimated stop must lie short of the next step for an
/// evaluation to leave that step's far neighbour out.
const MARGIN: f64 = 0.25;

/// Walks one task takes at least: a walk is a few curve lookups, far less than a task's
/// cost, and late in a settle only a few feeds are left walking.
const WALKS_PER_TASK: usize = 4_096;

/// Feeds without a host or on a host without a cap, settled together at the budget price;
/// and the capped hosts' feeds with their cap, by host (each may need a price of its own).
/// Settled host by host, uncapped hosts' feeds made batches of a few solves each, and a
/// population of many small hosts was priced on one core.
struct Groups {
    free: Vec<usize>,
    capped: BTreeMap<u32, (Vec<usize>, f64)>,
}

/// What the pricing did.
pub(crate) struct Priced {
    pub levels: Vec<Level>,
    pub evaluations: usize,
    /// The prices the levels were settled at (none when no fetch has any value).
    pub prices: Prices,
}

/// The prices of a fetch at an allocation: what one more fetch per period must save to be
/// worth taking. Kept with a plan so that one feed whose model changed can be re-solved on
/// its own between full solves ([`super::single::resolve_one`]): at the same prices, its
/// level is the one the full solve would give it while the others stay put.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Prices {
    /// The budget's price `μ` (weighted cost per period per fetch per period).
    pub budget: Option<f64>,
    /// The own price `π_h` of each capped host that bound; its feeds pay `max(μ, π_h)`.
    pub hosts: std::collections::HashMap<u32, f64>,
}

impl Prices {
    /// The price a feed of `host` pays, if the allocation was priced.
    pub fn for_host(&self, host: Option<u32>) -> Option<f64> {
        let mu = self.budget?;
        Some(match host.and_then(|h| self.hosts.get(&h)) {
            Some(&pi) => mu.max(pi),
            None => mu,
        })
    }
}

impl Allocator<'_> {
    /// Levels at the budget price: the cheapest total cost among allocations on the convex
    /// hull of the feeds' curves that spend at most the budget (and each host's cap). Returns
    /// `start` unchanged when no fetch has any value (every curve flat).
    pub(crate) fn priced<E>(&self, start: Vec<Level>, caches: &mut [CurveCache], eval: &E) -> Priced
    where
        E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
    {
        let n = start.len();
        let mut groups = Groups {
            free: Vec::new(),
            capped: BTreeMap::new(),
        };
        for (i, f) in self.feeds.iter().enumerate() {
            match f.host.and_then(|h| Some((h, self.host_caps.cap(h)?))) {
                Some((h, cap)) => groups
                    .capped
                    .entry(h)
                    .or_insert((Vec::new(), cap))
                    .0
                    .push(i),
                None => groups.free.push(i),
            }
        }
        // A host cap bounds each of its feeds alone too; walks never go past it.
        let top: Vec<Level> = self
            .feeds
            .iter()
            .map(|f| {
                let cap_level = f
                    .host
                    .and_then(|h| self.host_caps.cap(h))
                    .map(|c| super::alloc::floor_level(c, f.min))
                    .unwrap_or(f.max);
                f.max.min(cap_level).max(f.min)
            })
            .collect();
        let mut p = Pricer {
            alloc: self,
            levels: start,
            caches,
            eval,
            evaluations: 0,
            top,
            host_price: Default::default(),
        };
        // The price scale: cost per fetch at the start.
        let all: Vec<usize> = (0..n).collect();
        p.settle(&all, &|_| f64::NAN); // evaluates the start's neighbourhoods only (NaN never moves)
        let cost: f64 = (0..n)
            .filter_map(|i| p.caches[i].get(p.levels[i]).map(|c| c.cost))
            .sum();
        let rate: f64 = p.rate(&all);
        let scale = cost / rate.max(EPS);
        if !(scale > 0.0 && scale.is_finite()) {
            // Every level as good as any other: the start, if it fits the budget and the
            // hosts' caps (a replan's start is the previous plan, which may not).
            let levels = if self.fits(&p.levels) {
                p.levels
            } else {
                self.closed_form()
            };
            return Priced {
                levels,
                evaluations: p.evaluations,
                prices: Prices::default(),
            };
        }
        // The first guess: the median over feeds of the marginal value at the start (between
        // a feed's gain per unit up and its loss per unit down). The proportional start is
        // near the optimum, so the bracket around it is narrow and the walks stay short (each
        // new level a walk reaches is an exact solve).
        let mut marginals: Vec<f64> = (0..n).filter_map(|i| p.marginal(i)).collect();
        let guess = if marginals.is_empty() {
            scale
        } else {
            let mid = marginals.len() / 2;
            *marginals.select_nth_unstable_by(mid, f64::total_cmp).1
        };
        let guess = if guess > 0.0 && guess.is_finite() {
            guess
        } else {
            scale
        };
        let budget = self.budget;
        // The levels of the last settle that spent more than the budget (`lo`'s) and of the
        // last that fit it (`hi`'s), kept as they were found: with curves that are not convex
        // a walk's end depends on where it starts, so settling at `hi` again from other levels
        // can overspend. The answer is always a settle that was seen to fit.
        let mut at_lo: Vec<Level> = Vec::new();
        let mut at_hi: Option<Vec<Level>> = None;
        let mut hi = guess;
        let mut lo;
        if p.at(hi, &groups) <= budget + EPS {
            at_hi = Some(p.levels.clone());
            // Lower the price until the budget is exceeded, or until it cannot be (every
            // feed at its top or its host's cap): then spend what can be spent.
            let floor = guess * 1e-12;
            loop {
                let next = hi / BRACKET_STEP;
                if next < floor {
                    lo = 0.0;
                    break;
                }
                if p.at(next, &groups) > budget + EPS {
                    lo = next;
                    at_lo.clone_from(&p.levels);
                    break;
                }
                hi = next;
                at_hi = Some(p.levels.clone());
                if !p.can_spend_more(&groups) {
                    // Every feed is on a host at its cap: the budget cannot be spent.
                    lo = 0.0;
                    break;
                }
            }
        } else {
            loop {
                lo = hi;
                at_lo.clone_from(&p.levels);
                hi *= BRACKET_STEP;
                if p.at(hi, &groups) <= budget + EPS {
                    at_hi = Some(p.levels.clone());
                    break;
                }
                if hi > 1e300 {
                    break;
                }
            }
        }
        if lo > 0.0 {
            if let Some(fit) = at_hi.as_mut() {
                // Bisect until one step of one feed is all that separates the two ends: no
                // price between them gives other levels (with convex curves each feed's level
                // falls with the price), so the levels at `hi` are the answer. Halving on to a
                // fixed precision walked every feed some thirty times where a dozen find the
                // same levels.
                while hi - lo > PRECISION * hi && steps_apart(&at_lo, fit) > 1 {
                    let mid = 0.5 * (lo + hi);
                    if p.at(mid, &groups) <= budget + EPS {
                        hi = mid;
                        fit.clone_from(&p.levels);
                    } else {
                        lo = mid;
                        at_lo.clone_from(&p.levels);
                    }
                }
            }
        }
        p.levels = match at_hi {
            Some(fit) => fit,
            // No price fitted the budget (only curves that are not convex, walks stopping at
            // local minima, can get here): the proportional allocation fits it by
            // construction. Not the start: a replan starts from the previous plan, which
            // spends the previous budget.
            None => self.closed_form(),
        };
        Priced {
            levels: p.levels,
            evaluations: p.evaluations,
            prices: Prices {
                budget: Some(hi),
                hosts: p.host_price,
            },
        }
    }
}
