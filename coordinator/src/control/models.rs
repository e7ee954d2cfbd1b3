//! Live per-feed models from what fetches observed: hourly posting counts over the hours
//! each feed was watched, shrunk toward the pooled shape; rates shrunk toward the typical
//! feed's; reader access rates; exploration and document-capacity floors; and, with a weekly
//! period, day-of-week factors ([`crate::weekly`]) from the days each feed was watched.
//! The rules are listed in [`super::relearn`].

use super::calibrate;
use super::feedstate::FeedState;
use super::population::{self, Population};
use super::rate_prior;
use super::recency;
use super::regimes;
use super::relearn::PlannerSettings;
use super::shapes;
use super::shrink;
use super::siblings;
use crate::plan::alloc::{ceil_level, level_rate};
use crate::plan::floor::document_level;
use crate::plan::overflow::Document;
use crate::plan::planner::FeedModel;
use crate::registry::FeedRecord;
use crate::time::DAY_MS;
use crate::weekly;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

const BINS: usize = 24;

/// Most pseudo-days of pooling a feed's rate takes when the budget is below one fetch per
/// feed per day. The held-out choice ([`shrink::choose`]) scores each held-out day's hourly
/// counts by likelihood, and on bursty populations it pools heavily (16 pseudo-days on
/// `bursts`: the pool forecasts a burst's random hour best), while a plan with at most a
/// fetch a day gains from what each feed's own hours say. (Judging the pooling over the
/// plan's own period would not help: a fetch every k days leaves a posting at hour x
/// waiting 12(k − 1) hours plus what one fetch a day at the same hour leaves it, so shapes
/// rank alike.) Live `replay`, 0.5 fetches per feed per day, days 14 to the end, caps of
/// 4 / 6 / 8 / 10 / 12 / none: `bursts` 1,117.8 / 1,109.8 / 1,126.2 / 1,144.3 / 1,206.5 /
/// 1,174.1 min; `steady` 864.5 at 4, 845.9 from 8 up (its own choice is 8); `bursts` drawn
/// with seed 2, 8 against none: 1,195.4 / 1,209.5; `real-commits` 769.4 / 766.4
/// (docs/EXPERIMENTS.md, 2026-11-28). With rates under the fitted distribution, 6 against 8 on
/// thirteen runs at half a fetch a day: 1.000 (docs/EXPERIMENTS.md, 2026-12-03).
pub const SHRINKAGE_CAP_BELOW_DAILY: f64 = 8.0;

/// Every feed's model, in `feeds` order. `access_bins(feed)` gives the feed's weighted
/// reader accesses per hourly bin per day; `shapes_cache` keeps the population's mixture of
/// daily shapes between calls ([`shapes::ShapeCache`]).
pub fn models<S: std::borrow::Borrow<FeedState> + Sync>(
    feeds: &[FeedRecord],
    states: &HashMap<String, S>,
    access_bins: &(dyn Fn(&str) -> Vec<f32> + Sync),
    now_ms: i64,
    s: &PlannerSettings,
    shapes_cache: &mut shapes::ShapeCache,
) -> (Vec<FeedModel>, ModelCounts) {
    let (models, counts, _) = learn(feeds, states, access_bins, now_ms, s, shapes_cache);
    (models, counts)
}

/// [`models`], with what the round learned of the whole population: what one feed is
/// re-learned with between rounds ([`super::quick`]).
pub fn learn<S: std::borrow::Borrow<FeedState> + Sync>(
    feeds: &[FeedRecord],
    states: &HashMap<String, S>,
    access_bins: &(dyn Fn(&str) -> Vec<f32> + Sync),
    now_ms: i64,
    s: &PlannerSettings,
    shapes_cache: &mut shapes::ShapeCache,
) -> (Vec<FeedModel>, ModelCounts, Population) {
    // Owned states or shared ones (the live coordinator's snapshot), read alike.
    let state_of = |id: &str| states.get(id).map(|st| st.borrow());
    let window_start = now_ms - (s.window_days * DAY_MS as f64) as i64;
    let plan_cfg = s.plan_config(feeds.len());
    let mut counts = vec![[0.0f64; BINS]; feeds.len()];
    let mut exposure = vec![[0.0f64; BINS]; feeds.len()];
    let mut pooled = [0.0f64; BINS];
    let mut pooled_exposure = [0.0f64; BINS];
    let mut rates: Vec<f64> = Vec::new();
    // Recent observations weigh more; postings and exposure alike, so a steady feed's rate
    // is the same either way.
    let chosen = if s.tune_half_life {
        let watched: Vec<Option<&FeedState>> = feeds.iter().map(|f| state_of(&f.id)).collect();
        recency::choose(&watched, window_start, now_ms)
    } else {
        None
    };
    let half_life = chosen.map_or(s.half_life_days, |c| c.0);
    let w = |t: i64| recency::weight(now_ms - t, half_life);
    let mut span_days = vec![0.0f64; feeds.len()];
    let mut clump = vec![1.0f64; feeds.len()];
    // Each feed's tally on every core, written in place (a vector of tallies beside
    // these would hold 400 bytes a feed more at the peak), with the population's clump
    // hours from the same read of every window.
    let (watched_rates, clump_hours) = population::tally_population(
        feeds,
        |f: &FeedRecord| state_of(&f.id),
        window_start,
        now_ms,
        &w,
        population::TallyOut {
            counts: &mut counts,
            exposure: &mut exposure,
            span_days: &mut span_days,
            clump_size: &mut clump,
        },
    );
    let (regime_rising, regime_falling) =
        watched_rates
            .iter()
            .flatten()
            .fold((0, 0), |(up, down), &(_, level)| {
                (
                    up + usize::from(level >= regimes::SHOWN_LEVEL),
                    down + usize::from(level <= 1.0 / regimes::SHOWN_LEVEL),
                )
            });
    for ((c, e), rate) in counts.iter().zip(&exposure).zip(&watched_rates) {
        if rate.is_none() {
            continue;
        }
        for b in 0..BINS {
            pooled[b] += c[b];
            pooled_exposure[b] += e[b];
        }
    }
    // The population's distribution of rates, from every watched feed's postings and days
    // ([`super::rate_prior`]); fitted only when rates are not pooled by host, and once the
    // typical feed was watched most of a day ([`rate_prior::MIN_TYPICAL_DAYS`]).
    let rate_prior = if s.rate_prior && !s.host_level {
        let watched: Vec<(f64, f64)> = watched_rates
            .iter()
            .zip(&counts)
            .zip(&span_days)
            .filter(|((r, _), _)| r.is_some())
            .map(|((_, c), &d)| (c.iter().sum::<f64>(), d))
            .collect();
        rate_prior::RatePrior::fit(&watched).map(Arc::new)
    } else {
        None
    };
    rates.extend(watched_rates.into_iter().flatten().map(|(rate, _)| rate));
    // The pooled shape: postings per observed hour, so hours nobody has watched yet are
    // not mistaken for quiet ones.
    let per_hour: Vec<f64> = pooled
        .iter()
        .zip(&pooled_exposure)
        .map(|(c, e)| if *e > 0.0 { c / e } else { f64::NAN })
        .collect();
    let seen: Vec<f64> = per_hour.iter().copied().filter(|v| v.is_finite()).collect();
    let fill = if seen.is_empty() {
        1.0
    } else {
        seen.iter().sum::<f64>() / seen.len() as f64
    };
    let raw: Vec<f64> = per_hour
        .iter()
        .map(|v| if v.is_finite() { *v } else { fill })
        .collect();
    let total: f64 = raw.iter().sum();
    let shared: Vec<f64> = if total > 0.0 {
        raw.iter().map(|c| c / total).collect()
    } else {
        vec![1.0 / BINS as f64; BINS]
    };
    // Each feed's prior day: its posterior mean under the population's mixture of shifted
    // shapes, or the one pooled shape while too little is known to fit the mixture.
    // Below a daily fetch per feed, the one pooled shape ([`PlannerSettings::mixture_min_per_day`]).
    let per_feed_day = plan_cfg.budget / feeds.len().max(1) as f64 / s.days_per_period();
    let mixture_shapes = if per_feed_day + 1e-9 < s.mixture_min_per_day {
        0
    } else {
        s.shape_mixture
    };
    let mixture = shapes_cache.mixture(
        &counts,
        now_ms,
        &shapes::MixtureConfig {
            shapes: mixture_shapes,
            ..shapes::MixtureConfig::default()
        },
    );
    rates.sort_by(f64::total_cmp);
    let typical = rates.get(rates.len() / 2).copied().unwrap_or(1.0).max(0.1);
    let mut decided = ModelCounts::default();
    // The host level between a feed and everyone, when set: its host's other feeds, each
    // seen at its rate shrunk by one pseudo-day toward the typical feed's.
    let siblings = if s.host_level {
        let host_names: Vec<&str> = feeds.iter().map(|f| f.host.as_str()).collect();
        let sibling_rates: Vec<Option<f64>> = feeds
            .iter()
            .enumerate()
            .map(|(f, feed)| {
                state_of(&feed.id)
                    .and_then(|st| st.observed_since_ms)
                    .map(|_| (counts[f].iter().sum::<f64>() + typical) / (span_days[f] + 1.0))
            })
            .collect();
        siblings::Siblings::new(&host_names, &counts, &sibling_rates)
    } else {
        None
    };
    let kept = mixture.as_ref().and(shapes_cache.chosen());
    let tuned = if !s.tune_shrinkage {
        None
    } else if kept.is_some() {
        kept
    } else {
        let watched: Vec<Option<&FeedState>> = feeds.iter().map(|f| state_of(&f.id)).collect();
        let prior = shrink::Prior {
            shared: &shared,
            typical,
            mixture: mixture.as_deref(),
            siblings: siblings.as_ref(),
        };
        let chosen = shrink::choose(
            &watched,
            window_start,
            now_ms,
            &prior,
            shapes_cache.previous_choice(),
        );
        if let Some(c) = chosen {
            shapes_cache.keep_chosen(c);
        }
        chosen
    };
    decided.held_out_days = tuned.map_or(0, |t| t.held_out);
    decided.half_life_days = half_life;
    decided.half_life_feeds = chosen.map_or(0, |c| c.1);
    decided.regime_rising = regime_rising;
    decided.regime_falling = regime_falling;
    let beta = tuned.map_or(s.shrinkage, |t| t.days).max(1e-3);
    // Below a daily fetch per feed, the chosen pseudo-days are capped
    // ([`SHRINKAGE_CAP_BELOW_DAILY`]).
    let beta = if tuned.is_some() && per_feed_day + 1e-9 < 1.0 {
        beta.min(SHRINKAGE_CAP_BELOW_DAILY)
    } else {
        beta
    };
    // With shapes pooled by similarity, the shape's prior weighs pseudo-postings chosen
    // apart from the rate's pseudo-days ([`shrink::choose`]).
    let shape_postings = tuned.and_then(|t| t.shape_postings);
    decided.shape_postings = shape_postings.unwrap_or(0.0);
    let sibling_postings = tuned.map_or(0.0, |t| t.sibling_postings);
    decided.sibling_postings = sibling_postings;
    let hosted = siblings.as_ref().filter(|_| sibling_postings > 0.0);
    decided.mixture_shapes = shapes_cache.shapes_in_force();
    decided.shrinkage = beta;
    let (min_level, max_level) = s.levels();
    let days_per_period = s.days_per_period();
    // Weekly plans: each feed's observed days, and the population's day-of-week factors.
    let watched: Vec<Vec<weekly::Day>> = if s.weekly {
        feeds
            .iter()
            .map(|feed| {
                state_of(&feed.id)
                    .and_then(|st| {
                        let until = st.observed_until_ms(now_ms)?;
                        Some(watched_days(st, window_start, until))
                    })
                    .unwrap_or_default()
            })
            .collect()
    } else {
        Vec::new()
    };
    let prior = weekly::pooled(&watched);
    let mut hosts: HashMap<&str, u32> = HashMap::new();
    // Each feed's hourly rates, on every core (a posterior per feed under the mixture),
    // moved into its model below: the evidence for its shape is its own hours, and its
    // host's other feeds' weighed as the chosen pseudo-postings.
    let watched_now: Vec<bool> = feeds
        .iter()
        .map(|feed| state_of(&feed.id).is_some_and(|st| st.observed_since_ms.is_some()))
        .collect();
    // The rates' forward calibration, under the shrinkage and half-life in force.
    let calibration = if s.calibrate_rates {
        let watched: Vec<Option<&FeedState>> = feeds.iter().map(|f| state_of(&f.id)).collect();
        calibrate::fit(
            &watched,
            s.window_days,
            now_ms,
            half_life,
            (beta, typical),
            rate_prior.as_deref(),
        )
        .map(Arc::new)
    } else {
        None
    };
    decided.calibrated_feeds = calibration.as_ref().map_or(0, |c| c.feeds);
    decided.silent_factor = calibration.as_ref().map_or(0.0, |c| c.silent_factor());
    decided.rate_prior_mean = rate_prior.as_ref().map_or(0.0, |p| p.mean());
    let population = Population {
        half_life_days: half_life,
        window_days: s.window_days,
        shared: shared.clone(),
        clump_hours,
        weekly: s.weekly,
        typical,
        beta,
        rate_prior,
        mixture: mixture.clone(),
        shape_postings,
        shape_pseudo_postings: s.shape_pseudo_postings,
        calibration,
    };
    let mut daily: Vec<Vec<f32>> = {
        (0..feeds.len())
            .into_par_iter()
            .map(|f| {
                let toward = hosted.map_or(typical, |h| h.rate(f, typical));
                let evidence = match (mixture.is_some(), hosted) {
                    (true, Some(h)) => h.hours(f, &counts[f]).map_or(counts[f], |sib| {
                        siblings::evidence(&counts[f], &sib, sibling_postings)
                    }),
                    _ => counts[f],
                };
                population.hours(
                    &counts[f],
                    &exposure[f],
                    span_days[f],
                    watched_now[f],
                    toward,
                    &evidence,
                )
            })
            .collect()
    };
    // Hosts numbered in order of first appearance (one pass), then each feed's model on
    // every core: on one core this loop was a second of a million-feed plan.
    let host_ids: Vec<u32> = feeds
        .iter()
        .map(|feed| {
            let next = hosts.len() as u32;
            *hosts.entry(feed.host.as_str()).or_insert(next)
        })
        .collect();
    // Written straight into vectors of the population's length (`unzip_into_vecs`): a
    // plain `unzip` gathers each core's part and copies them together, and a million
    // models held twice were the learner's peak.
    let (mut models, mut shapes_chosen) = (Vec::new(), Vec::new());
    daily
        .par_iter_mut()
        .zip(feeds.par_iter())
        .enumerate()
        .map(|(f, (daily, feed))| -> (FeedModel, Option<u8>) {
            let post_bins = std::mem::take(daily);
            let (factors, shape) = match watched.get(f) {
                Some(days) if !days.is_empty() => {
                    let first = days[0].weekday;
                    // Days are consecutive from an absolute day whose weekday is `first`.
                    let chosen = weekly::choose(days, &|k| (k + first) / 7, &prior);
                    (chosen.factors, Some(chosen.shape as u8))
                }
                _ => ([1.0; 7], None),
            };
            let lo = min_level;
            let access = access_bins(&feed.id);
            let (post_bins, access) = if s.weekly {
                let access = if access.len() == BINS {
                    weekly::weekly_bins(&access, &[1.0; 7])
                } else {
                    access
                };
                (weekly::weekly_bins(&post_bins, &factors), access)
            } else {
                (post_bins, access)
            };
            // A feed on a timer: where in the day its postings land ([`super::timer`]).
            let peaks = state_of(&feed.id)
                .filter(|_| s.timer_peaks)
                .map(|st| {
                    let from = st.postings_ms.partition_point(|&t| t < window_start);
                    let times: Vec<i64> = st.postings_ms.range(from..).copied().collect();
                    super::timer::peaks(&times)
                })
                .unwrap_or_default();
            let model = FeedModel {
                weight: feed.weight,
                post_bins,
                peaks,
                access_bins: access,
                min_level: lo,
                max_level: max_level.max(lo),
                host: Some(host_ids[f]),
                document: None,
            };
            (model, shape)
        })
        .unzip_into_vecs(&mut models, &mut shapes_chosen);
    drop(host_ids);
    decided.timer_feeds = models.iter().filter(|m| !m.peaks.is_empty()).count();
    for shape in shapes_chosen.into_iter().flatten() {
        decided.week_shapes[shape as usize] += 1;
    }
    // Each feed's document and its claim to exploration, in a pass of their own.
    let (mut documents, mut explore) = (Vec::new(), Vec::new());
    feeds
        .par_iter()
        .enumerate()
        .map(|(f, feed)| -> (Option<(f64, bool)>, Option<f64>) {
            let state = state_of(&feed.id).filter(|st| st.observed_since_ms.is_some());
            let n: f64 = counts[f].iter().sum();
            // Few postings seen: a candidate for exploration, by its latest evidence.
            let explore = match state {
                Some(st) if (n as usize) < s.explore_min_postings => Some(
                    st.postings_ms
                        .back()
                        .copied()
                        .or(st.observed_since_ms)
                        .unwrap_or(now_ms) as f64,
                ),
                Some(_) => None,
                // Never watched: first in line.
                None => (s.explore_min_postings > 0).then_some(now_ms as f64),
            };
            // A model watched for less than a day does not know its busy hours yet: its
            // floor only covers its mean rate until then.
            let document = state.filter(|st| st.doc_capacity >= 2).map(|st| {
                (
                    st.doc_capacity as f64,
                    st.observed_span_ms(now_ms) >= DAY_MS,
                )
            });
            (document, explore)
        })
        .unzip_into_vecs(&mut documents, &mut explore);
    let candidates: Vec<(usize, f64)> = explore
        .into_iter()
        .enumerate()
        .filter_map(|(f, t)| Some((f, t?)))
        .collect();
    // Once a document's size is known: enough fetches, placed as the plan will place them,
    // that it does not overflow between two of them. Busy feeds solve a few schedules for
    // this, so it runs on every core.
    // Each feed's fetches per period held by its raised minimum beyond the one it had.
    // With lost postings priced (`delay` only: the price is in its units), each feed's
    // document goes to the planner instead, and no floor is raised.
    let priced = s
        .lost_posting_hours
        .filter(|_| s.metric == crate::plan::cost::Metric::Delay);
    let raised: Vec<Option<f64>> = models
        .par_iter_mut()
        .zip(&documents)
        .zip(&clump)
        .map(|((model, items), &clump)| match (*items, priced) {
            (Some((items, _)), Some(hours)) => {
                model.document = Some(Document {
                    items,
                    clump,
                    lost_cost: model.weight * hours * 3600.0,
                });
                None
            }
            (Some((items, placed)), None) => {
                // Not priced, but counted: the plan's expected losses are shown either way.
                model.document = Some(Document {
                    items,
                    clump,
                    lost_cost: 0.0,
                });
                let floor = document_level(model, &plan_cfg, fill_of(clump) * items, placed);
                (floor > model.min_level).then(|| {
                    let before = level_rate(model.min_level);
                    model.min_level = floor.min(model.max_level);
                    level_rate(model.min_level) - before
                })
            }
            (None, _) => None,
        })
        .collect();
    decided.capacity_floors = raised.iter().flatten().count();
    decided.capacity_floor_fetches_per_day =
        raised.iter().flatten().sum::<f64>() / days_per_period.max(1e-9);
    // Exploration last, so its share is of what the document floors left. Daily fetches:
    // seven a week on a weekly plan.
    decided.exploring = crate::learn::explore_within(
        &mut models,
        &candidates,
        ceil_level(days_per_period),
        plan_cfg.budget,
        s.explore_share,
    );
    (models, decided, population)
}

/// What building the models decided beyond the rates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelCounts {
    /// Feeds raised to a daily fetch to explore them (within the budget's share).
    pub exploring: usize,
    /// Feeds whose forecast a week ago backed the rates' calibration (0: none in force).
    pub calibrated_feeds: usize,
    /// What feeds silent all their window posted in the week after, over their forecast
    /// ([`calibrate`]); 0 when no calibration was fitted (`Default`).
    pub silent_factor: f64,
    /// Mean rate, postings a day, of the population's fitted distribution of rates
    /// ([`rate_prior`]); 0 when rates were shrunk by pseudo-days instead.
    pub rate_prior_mean: f64,
    /// Feeds whose minimum was raised so their document does not overflow.
    pub capacity_floors: usize,
    /// Fetches per day those raised minimums hold beyond the minimums they replaced: budget
    /// the allocation cannot move to where it would cut delay most.
    pub capacity_floor_fetches_per_day: f64,
    /// Weekly plans: feeds per [`weekly::WeekShape`] (daily, pooled, weekday/weekend, day
    /// of week).
    pub week_shapes: [usize; 4],
    /// Feeds found on a timer, whose models carry a peak ([`super::timer`]).
    pub timer_feeds: usize,
    /// Pseudo-days of shrinkage the models used (chosen or configured).
    pub shrinkage: f64,
    /// Feed-days held out to choose it (0: the configured value).
    pub held_out_days: usize,
    /// Base shapes of the mixture in force (0: the one pooled shape, while too few
    /// postings back a fit or with `shape_mixture` 0).
    pub mixture_shapes: usize,
    /// Pseudo-postings of each feed's shape prior, chosen apart from the rate's pseudo-days
    /// when shapes are pooled by similarity (0: not chosen; the pseudo-days rule applies).
    pub shape_postings: f64,
    /// Pseudo-postings of a feed's host's other feeds' hours in its shape's evidence, its
    /// rate shrunk toward theirs (0: the host level is left out; [`super::siblings`]).
    pub sibling_postings: f64,
    /// Half-life of the observations' weight, days (0: none; chosen or configured).
    pub half_life_days: f64,
    /// Feeds whose last week chose it (0: the configured value).
    pub half_life_feeds: usize,
    /// Feeds whose current regime posts at least twice their window's rate
    /// ([`super::regimes::SHOWN_LEVEL`]).
    pub regime_rising: usize,
    /// Feeds whose current regime posts at most half their window's rate.
    pub regime_falling: usize,
}

/// The share of its document a feed's floor lets one gap fill, by its lump size.
fn fill_of(clump: f64) -> f64 {
    if clump > 1.0 {
        DOCUMENT_FILL
    } else {
        DOCUMENT_FILL_UNCLUMPED
    }
}

/// Share of a feed's document the postings expected between two fetches may fill: the
/// rest is margin for bursts (postings are Poisson around the model, not its mean).
pub const DOCUMENT_FILL: f64 = 0.5;

/// [`DOCUMENT_FILL`] for a feed that posted no clump in the window
/// ([`super::population::Tally::clumped`]): its postings vary between gaps as Poisson counts
/// do: at 70% of a 20-item document a gap overflows with a chance of about 1 in 20 (at half,
/// 1 in 600), and what it loses is a posting or two. Half a document is kept for feeds that
/// post in clumps: one clump more in a gap is what overflows it. Measured with overflowed
/// time left out of the models (docs/EXPERIMENTS.md, "Overflowed documents…"): half a document
/// for every feed cost `steady` at half a fetch a day 3–7% in delay; 65% for every feed
/// cost `bursts` 10%.
pub const DOCUMENT_FILL_UNCLUMPED: f64 = 0.7;

/// The whole days (UTC, counted from the Unix epoch) a feed was watched within the
/// learning window, with its postings on each: dated ones on their day, spread ones in
/// proportion to each day's share of their interval; the first and last day count for the
/// part that was watched.
fn watched_days(st: &FeedState, window_start: i64, now_ms: i64) -> Vec<weekly::Day> {
    let Some(since) = st.observed_since_ms.map(|s| s.max(window_start)) else {
        return Vec::new();
    };
    if now_ms <= since {
        return Vec::new();
    }
    let first = since.div_euclid(DAY_MS);
    let last = (now_ms - 1).div_euclid(DAY_MS);
    let mut days: Vec<weekly::Day> = (first..=last)
        .map(|d| {
            let (lo, hi) = ((d * DAY_MS).max(since), ((d + 1) * DAY_MS).min(now_ms));
            weekly::Day {
                weekday: d.rem_euclid(7) as usize,
                count: 0.0,
                exposure: (hi - lo).max(0) as f64 / DAY_MS as f64,
            }
        })
        .collect();
    let index = |t: i64| (t.div_euclid(DAY_MS) - first) as usize;
    for &t in st.postings_ms.iter().filter(|&&t| t >= since && t < now_ms) {
        days[index(t)].count += 1.0;
    }
    for &(from, to) in &st.spread_ms {
        let (from, to) = (from.max(since), to.min(now_ms));
        if to <= from {
            continue;
        }
        let mut t = from;
        while t < to {
            let end = ((t.div_euclid(DAY_MS) + 1) * DAY_MS).min(to);
            days[index(t)].count += (end - t) as f64 / (to - from) as f64;
            t = end;
        }
    }
    days
}

/// Days of observation each hour of the day got in `[from, to)` (ms).
pub(crate) fn hour_exposure(from: i64, to: i64) -> [f64; BINS] {
    let mut e = [0.0; BINS];
    if to <= from {
        return e;
    }
    let full = (to - from) / DAY_MS;
    for v in e.iter_mut() {
        *v = full as f64;
    }
    let hour = DAY_MS / BINS as i64;
    let mut t = from + full * DAY_MS;
    while t < to {
        let end = ((t.div_euclid(hour) + 1) * hour).min(to);
        e[(t.rem_euclid(DAY_MS) / hour) as usize] += (end - t) as f64 / hour as f64;
        t = end;
    }
    e
}

#[cfg(test)]
#[path = "models_tests.rs"]
mod tests;
