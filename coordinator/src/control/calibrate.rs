//! The rates' forward calibration: what feeds forecast at a rate went on to post.
//!
//! Every other choice of the learner is scored on held-out days *inside* its window (leave
//! one day out), which assumes a feed's rate holds across the window. Populations where
//! feeds start and stop break that in one direction: a feed silent for two weeks is, by
//! that score, a feed that posts almost never, while on a population where feeds start
//! posting for good a silent feed is likelier to start than its silence says. On real commit
//! feeds, busy for a week and quiet after, the error runs the other way for busy ones.
//!
//! So the learner asks the population itself: it rebuilds every feed's rate as it would
//! have been [`HORIZON_DAYS`] ago (the same formula, the window ending then, reaching back
//! as far as the states keep: the live window is pruned at its start, so the forecast learns
//! from that much less; its pseudo-days scaled by its days over today's, so it is pulled
//! toward the typical rate as hard as today's rate is), and compares each forecast with the
//! postings the feed made since. Feeds are
//! grouped by their forecast, an octave of rate per group; each group's factor is its
//! postings over its forecast postings, each side with [`PSEUDO_POSTINGS`] added so a thin
//! group stays near 1. A feed's rate now is multiplied by the factor of its rate,
//! interpolated in logarithms between the groups' centres (flat beyond the end ones).
//!
//! The forecast is judged by what the planner needs next — the coming days — not by how
//! well a day inside the window is explained by the others. On the synthetic `quiet`
//! population (a third of the feeds start or stop) the feeds silent for two weeks post, in
//! the next week, several times what their shrunk rate says; on `steady` every group's
//! factor is within noise of 1.

use super::feedstate::FeedState;
use super::population::{tally_before, EVEN_DAY};
use super::rate_prior::RatePrior;
use super::recency;
use crate::time::DAY_MS;
use rayon::prelude::*;

/// How far back the forecasts are made: the week since is what they are scored on.
pub const HORIZON_DAYS: f64 = 7.0;

/// Pseudo-postings on each side of a group's ratio.
pub const PSEUDO_POSTINGS: f64 = 5.0;

/// What one feed's week may count, postings a day watched (or times its forecast, if more).
const FLOOD_PER_DAY: f64 = 4.0;

/// Least days a feed was watched before the forecast, and of the horizon after it, to count.
const MIN_WATCHED_DAYS: f64 = 2.0;

/// The factor is held within `[1 / MAX_FACTOR, MAX_FACTOR]`.
const MAX_FACTOR: f64 = 16.0;

/// Factors by forecast rate: (ln rate at the group's centre, ln factor), ascending.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RateCalibration {
    points: Vec<(f64, f64)>,
    /// The factor of feeds that posted nothing in their window (ln), if any were scored.
    silent: Option<f64>,
    /// Feeds whose forecast was scored.
    pub feeds: usize,
}

impl RateCalibration {
    /// The factor for a feed whose rate (postings a day, before calibration) is `rate`;
    /// `silent`: it posted nothing in its window.
    pub fn factor(&self, rate: f64, silent: bool) -> f64 {
        if silent {
            if let Some(s) = self.silent {
                return s.exp();
            }
        }
        let (Some(first), Some(last)) = (self.points.first(), self.points.last()) else {
            return 1.0;
        };
        if !(rate > 0.0 && rate.is_finite()) {
            return 1.0;
        }
        let x = rate.ln();
        let ln = if x <= first.0 {
            first.1
        } else if x >= last.0 {
            last.1
        } else {
            let i = self.points.partition_point(|p| p.0 <= x);
            let ((x0, y0), (x1, y1)) = (self.points[i - 1], self.points[i]);
            y0 + (y1 - y0) * (x - x0) / (x1 - x0).max(1e-12)
        };
        ln.exp()
    }

    /// The factor of feeds silent all their window (1 when none was scored).
    pub fn silent_factor(&self) -> f64 {
        self.silent.map_or(1.0, f64::exp)
    }
}

/// A group's sums.
#[derive(Clone, Copy, Default)]
struct Group {
    postings: f64,
    forecast: f64,
    ln_rate: f64,
    weight: f64,
}

/// The calibration at `now_ms`, from the feeds' states (`None`: not watched), the window's
/// length, the half-life and the rate's shrinkage (`beta` pseudo-days toward `typical`)
/// in force, or the population's fitted distribution of rates when the rates are its
/// posterior means (`prior`; [`super::rate_prior`]). `None` when no feed was watched long
/// enough on both sides of the forecast.
pub fn fit(
    states: &[Option<&FeedState>],
    window_days: f64,
    now_ms: i64,
    half_life_days: f64,
    (beta, typical): (f64, f64),
    prior: Option<&RatePrior>,
) -> Option<RateCalibration> {
    let horizon = (HORIZON_DAYS * DAY_MS as f64) as i64;
    // Fixed through each UTC day: a factor that moved with every round would move every
    // plan a little each time, and plans pay for their changes (catch-ups, skipped times).
    let now_ms = now_ms.div_euclid(DAY_MS) * DAY_MS;
    let cut = now_ms - horizon;
    let window_start = cut - (window_days * DAY_MS as f64) as i64;
    let min_watched = (MIN_WATCHED_DAYS * DAY_MS as f64) as i64;
    let w = |t: i64| recency::weight(cut - t, half_life_days);
    // Each feed's forecast and what came, on every core, collected in feed order (the sums
    // then do not depend on the thread count).
    let scored: Vec<(f64, f64, f64, bool)> = states
        .par_iter()
        .filter_map(|st| {
            let st = (*st)?;
            let since = st.observed_since_ms?;
            let until = st.observed_until_ms(now_ms)?;
            if since > cut - min_watched || until < cut + min_watched {
                return None;
            }
            // Only the rate is read: where a clump's excess goes in the day does not matter.
            let past = tally_before(st, window_start, cut, &w, cut, &EVEN_DAY)?;
            let days = watched_days(st, cut, until);
            // The forecast is pulled toward the typical rate as hard as the feed's rate is
            // now: the week-old window holds a week fewer days, and with the same
            // pseudo-days it was pulled harder, so its factor undid more shrinkage than
            // today's rate carries (`steady` at half a fetch a day, 4–8 pseudo-days: busy
            // groups scaled 1.5–1.8, +22% delay; docs/EXPERIMENTS.md).
            let beta = beta * past.span_days / (past.span_days + days).max(1e-9);
            // Under the fitted distribution the shorter window's posterior is pulled as
            // hard as its fewer days say, no scaling needed.
            let rate = match prior {
                Some(p) => p.rate(past.n, past.span_days),
                None => (past.n + beta * typical) / (past.span_days + beta),
            };
            if !(rate > 0.0 && rate.is_finite()) {
                return None;
            }
            let came = st
                .postings_ms
                .iter()
                .filter(|&&t| t >= cut && t < until)
                .count()
                + st.spread_ms
                    .iter()
                    .filter(|&&(_, to)| to >= cut && to < until)
                    .count();
            // A flood (an import, 500 items in an hour) says little of the feed's rate,
            // and counted whole it would scale its whole group: a feed's week counts at
            // most `FLOOD_PER_DAY` a day watched, or that many times its forecast.
            let cap = days * FLOOD_PER_DAY.max(FLOOD_PER_DAY * rate);
            (days > 0.0).then_some((rate, (came as f64).min(cap), days, past.n <= 0.0))
        })
        .collect();
    if scored.is_empty() {
        return None;
    }
    let mut groups: std::collections::BTreeMap<i64, Group> = Default::default();
    let mut silent = Group::default();
    for &(rate, came, days, quiet) in &scored {
        let g = if quiet {
            &mut silent
        } else {
            groups.entry(rate.log2().floor() as i64).or_default()
        };
        g.postings += came;
        g.forecast += rate * days;
        g.ln_rate += rate.ln() * days;
        g.weight += days;
    }
    let ln_factor = |g: &Group| {
        ((g.postings + PSEUDO_POSTINGS) / (g.forecast + PSEUDO_POSTINGS))
            .clamp(1.0 / MAX_FACTOR, MAX_FACTOR)
            .ln()
    };
    let points = groups
        .values()
        .map(|g| (g.ln_rate / g.weight, ln_factor(g)))
        .collect();
    Some(RateCalibration {
        points,
        silent: (silent.weight > 0.0).then(|| ln_factor(&silent)),
        feeds: scored.len(),
    })
}

/// Days watched in `[from, to)`, less the spans postings may have scrolled off in.
fn watched_days(st: &FeedState, from: i64, to: i64) -> f64 {
    let blind: i64 = st.blind_within(from, to).map(|(a, b)| b - a).sum();
    (to - from - blind).max(0) as f64 / DAY_MS as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::feedstate::FetchObservation;

    const H: i64 = DAY_MS / 24;

    /// Fetched daily at 23:00 for 28 days before `now`; one posting at 10:00 on the days
    /// `posts` says.
    fn feed(now: i64, posts: impl Fn(i64) -> bool) -> FeedState {
        let mut st = FeedState::default();
        for d in (0..28).rev() {
            let day = now / DAY_MS - 1 - d;
            let new_items = if posts(d) {
                vec![(day as u64, Some(day * DAY_MS + 10 * H))]
            } else {
                Vec::new()
            };
            st.observe(
                &FetchObservation {
                    finished_ms: day * DAY_MS + 23 * H,
                    answered: true,
                    new_items,
                    ..Default::default()
                },
                28 * DAY_MS,
            );
        }
        st
    }

    #[test]
    fn a_steady_feeds_calibrated_rate_undoes_its_shrinkage_and_no_more() {
        let now = 20_000 * DAY_MS;
        let steady: Vec<FeedState> = (0..40).map(|_| feed(now, |_| true)).collect();
        let states: Vec<Option<&FeedState>> = steady.iter().map(Some).collect();
        // Heavy shrinkage toward a busier typical feed, as the held-out choice takes at
        // half a fetch a day: today's rate (27 postings over 27 days watched) is pulled up.
        let (beta, typical) = (8.0, 4.0);
        let c = fit(&states, 28.0, now, 0.0, (beta, typical), None).expect("watched both sides");
        let today = (27.0 + beta * typical) / (27.0 + beta);
        assert!(today > 1.6, "{today}");
        let calibrated = today * c.factor(today, false);
        // A week-old forecast shrunk with the same pseudo-days over its 20 days gave 0.92.
        assert!(
            (0.95..1.05).contains(&calibrated),
            "calibrated rate {calibrated}"
        );
    }

    #[test]
    fn silent_feeds_that_start_raise_the_silent_factor_and_steady_ones_stay_at_one() {
        let now = 20_000 * DAY_MS;
        // `d` counts days back from yesterday: d < 7 is the week scored.
        let steady: Vec<FeedState> = (0..40).map(|_| feed(now, |_| true)).collect();
        let starters: Vec<FeedState> = (0..40).map(|_| feed(now, |d| d < 7)).collect();
        let silent: Vec<FeedState> = (0..40).map(|_| feed(now, |_| false)).collect();
        let mut states: Vec<Option<&FeedState>> = steady.iter().map(Some).collect();
        states.extend(silent.iter().map(Some));
        let staying = fit(&states, 28.0, now, 0.0, (1.0, 1.0), None).expect("watched both sides");
        states.extend(starters.iter().map(Some));
        let starting = fit(&states, 28.0, now, 0.0, (1.0, 1.0), None).expect("watched both sides");
        assert_eq!(starting.feeds, 120);
        // A steady feed posts what it was forecast to.
        for c in [&staying, &starting] {
            let f = c.factor(1.0, false);
            assert!((0.95..1.05).contains(&f), "steady factor {f}");
        }
        // Silent for three weeks: forecast 1 / 22 a day. Where half of them start posting
        // daily, the silent ones post about 0.5 a day, some ten times the forecast; where
        // they stay silent, less than forecast (silence is evidence).
        let up = starting.factor(0.05, true);
        assert!((8.0..12.0).contains(&up), "starting factor {up}");
        let down = staying.factor(0.05, true);
        assert!((0.1..0.5).contains(&down), "staying factor {down}");
        // A flood in one feed's week moves its group no more than a few busy days would.
        let flood = {
            let mut st = feed(now, |_| true);
            let day = now / DAY_MS - 1;
            st.observe(
                &FetchObservation {
                    finished_ms: day * DAY_MS + 23 * H + 30 * 60_000,
                    answered: true,
                    new_items: (0..500u64)
                        .map(|k| {
                            (
                                1_000_000 + k,
                                Some(day * DAY_MS + 23 * H + 60_000 + k as i64),
                            )
                        })
                        .collect(),
                    ..Default::default()
                },
                28 * DAY_MS,
            );
            st
        };
        let mut with_flood: Vec<Option<&FeedState>> = steady.iter().map(Some).collect();
        with_flood.push(Some(&flood));
        let c = fit(&with_flood, 28.0, now, 0.0, (1.0, 1.0), None).expect("watched both sides");
        let f = c.factor(1.0, false);
        assert!((0.9..1.15).contains(&f), "a flood moved its group to {f}");
        // An empty population calibrates nothing.
        assert!(fit(&[None], 28.0, now, 0.0, (1.0, 1.0), None).is_none());
    }

    #[test]
    fn factors_interpolate_in_logarithms_and_hold_flat_beyond_the_ends() {
        let c = RateCalibration {
            points: vec![(0.1f64.ln(), 4.0f64.ln()), (1.0f64.ln(), 1.0f64.ln())],
            silent: Some(3.0f64.ln()),
            feeds: 2,
        };
        assert!((c.factor(0.01, false) - 4.0).abs() < 1e-12);
        assert!((c.factor(10.0, false) - 1.0).abs() < 1e-12);
        // Half-way in ln rate between the centres: half-way in ln factor, a factor of 2.
        assert!((c.factor(0.1f64.sqrt(), false) - 2.0).abs() < 1e-9);
        assert!((c.factor(0.01, true) - 3.0).abs() < 1e-12);
        assert_eq!(c.factor(f64::NAN, false), 1.0);
        assert_eq!(RateCalibration::default().factor(0.5, true), 1.0);
    }
}
