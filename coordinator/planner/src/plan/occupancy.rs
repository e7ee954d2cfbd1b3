//! Planned fetches per slot, day by day: what a per-slot capacity (`crowd`) is held to.
//!
//! A feed fetched every day is in its slots every day. A feed fetched once every `k` days
//! is in its slot on the days `d` with `d mod k` its phase (days since the Unix epoch, as
//! the workers count them), so one slot's count differs from day to day: ten feeds of a
//! seven-day cycle sharing a minute put 1.4 fetches there on average, but as many as ten on
//! one day if they share a phase. The counts are kept over the cycles' common horizon
//! (their least common multiple, at most [`MAX_HORIZON`] days), where every day's pattern
//! repeats; cycles that do not divide it (longer than the default floor of a week allows)
//! are counted on the days of the horizon they fall on, which is close, not exact.

use super::planner::FeedPlan;

/// Days the counts are kept over at most: `lcm(1..=7)`, every cycle the default floor of one
/// fetch a week allows.
pub const MAX_HORIZON: usize = 420;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Planned fetches per slot on each day of the horizon.
#[derive(Clone, Debug)]
pub struct Occupancy {
    n: usize,
    horizon: usize,
    /// Fetches of daily feeds, per slot (the same every day).
    daily: Vec<f64>,
    /// Fetches of feeds on longer cycles, `day * n + slot`; empty when there are none.
    by_day: Vec<f32>,
    /// Per slot, the most `by_day` holds on any day.
    day_max: Vec<f64>,
}

impl Occupancy {
    /// The counts of `plans` over `n` slots.
    pub fn of(plans: &[FeedPlan], n: usize) -> Self {
        let horizon = plans
            .iter()
            .map(|p| p.period_multiple.max(1) as usize)
            .fold(1usize, |h, k| {
                let l = h / gcd(h, k) * k;
                if l > MAX_HORIZON {
                    h
                } else {
                    l
                }
            });
        let mut o = Occupancy {
            n,
            horizon,
            daily: vec![0.0; n],
            by_day: if horizon > 1 {
                vec![0.0; horizon * n]
            } else {
                Vec::new()
            },
            day_max: vec![0.0; n],
        };
        for p in plans {
            for &x in &p.slots {
                o.add_unchecked(x as usize, p.period_multiple, p.phase_period, 1.0);
            }
        }
        for s in 0..n {
            o.refresh(s);
        }
        o
    }

    /// Slots per day.
    pub fn slots(&self) -> usize {
        self.n
    }

    /// The most fetches slot `s` holds on any day.
    pub fn busiest(&self, s: usize) -> f64 {
        self.daily[s] + self.day_max[s]
    }

    /// The busiest slot's count.
    pub fn busiest_slot(&self) -> f64 {
        (0..self.n).map(|s| self.busiest(s)).fold(0.0, f64::max)
    }

    /// Fetches a day on average over all slots.
    pub fn mean_per_day(&self) -> f64 {
        let long: f64 = self.by_day.iter().map(|&v| f64::from(v)).sum();
        self.daily.iter().sum::<f64>() + long / self.horizon as f64
    }

    /// The days (of the horizon) a fetch of cycle `k` at `phase` is made on.
    fn days(&self, k: u32, phase: u32) -> impl Iterator<Item = usize> {
        let k = k.max(1) as usize;
        (phase as usize % k..self.horizon).step_by(k)
    }

    fn add_unchecked(&mut self, s: usize, k: u32, phase: u32, sign: f64) {
        if s >= self.n {
            return;
        }
        if k <= 1 || self.horizon == 1 {
            self.daily[s] += sign;
            return;
        }
        let n = self.n;
        for d in self.days(k, phase).collect::<Vec<_>>() {
            self.by_day[d * n + s] += sign as f32;
        }
    }

    fn refresh(&mut self, s: usize) {
        if self.by_day.is_empty() {
            return;
        }
        let n = self.n;
        self.day_max[s] = (0..self.horizon)
            .map(|d| f64::from(self.by_day[d * n + s]))
            .fold(0.0, f64::max);
    }

    /// Adds (`sign` 1) or takes out (−1) one fetch of a feed of cycle `k` at `phase` in
    /// slot `s`.
    pub fn add(&mut self, s: usize, k: u32, phase: u32, sign: f64) {
        self.add_unchecked(s, k, phase, sign);
        if k > 1 && s < self.n {
            self.refresh(s);
        }
    }

    /// Adds (`sign` 1) or takes out (−1) every fetch of `plan`.
    pub fn add_plan(&mut self, plan: &FeedPlan, sign: f64) {
        for &x in &plan.slots {
            self.add(x as usize, plan.period_multiple, plan.phase_period, sign);
        }
    }

    /// The most slot `s` holds on the days a fetch of cycle `k` at `phase` is made.
    pub fn on_days(&self, s: usize, k: u32, phase: u32) -> f64 {
        if k <= 1 || self.by_day.is_empty() {
            return self.busiest(s);
        }
        let n = self.n;
        self.daily[s]
            + self
                .days(k, phase)
                .map(|d| f64::from(self.by_day[d * n + s]))
                .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::alloc::Level;

    fn plan(slots: Vec<u32>, k: u32, phase: u32) -> FeedPlan {
        FeedPlan {
            level: if k > 1 {
                -(k as Level)
            } else {
                slots.len() as Level
            },
            slots,
            period_multiple: k,
            phase_period: phase,
            expected_cost: 0.0,
        }
    }

    #[test]
    fn counts_each_day_as_the_workers_fetch_it() {
        // Brute force over 840 days: which plans fetch in each slot on each day.
        let plans = vec![
            plan(vec![3, 7], 1, 0),
            plan(vec![3], 3, 1),
            plan(vec![3], 3, 1),
            plan(vec![3], 2, 0),
            plan(vec![7], 7, 5),
            plan(vec![7], 4, 2),
        ];
        let o = Occupancy::of(&plans, 10);
        assert_eq!(o.horizon, 84);
        let mut most = [0.0f64; 10];
        let mut total = 0.0;
        for day in 0..840u32 {
            let mut c = [0.0f64; 10];
            for p in &plans {
                if day % p.period_multiple == p.phase_period {
                    for &x in &p.slots {
                        c[x as usize] += 1.0;
                    }
                }
            }
            total += c.iter().sum::<f64>();
            for (m, v) in most.iter_mut().zip(c) {
                *m = m.max(v);
            }
        }
        for (s, &m) in most.iter().enumerate() {
            assert_eq!(o.busiest(s), m, "slot {s}");
        }
        // Slot 3: the daily feed, both 3-day feeds on days 1, 4, … and the 2-day feed on
        // even days meet on day 4.
        assert_eq!(o.busiest(3), 4.0);
        assert!((o.mean_per_day() - total / 840.0).abs() < 1e-9);
        // A fetch of the 3-day cycle at phase 0 meets the daily feed and the 2-day one.
        assert_eq!(o.on_days(3, 3, 0), 2.0);
        let mut o = o;
        o.add_plan(&plans[1], -1.0);
        o.add_plan(&plans[2], -1.0);
        assert_eq!(o.busiest(3), 2.0);
    }
}
