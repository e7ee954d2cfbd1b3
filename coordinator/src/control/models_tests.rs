//! Tests of `models.rs`.

use super::*;

/// The models of `feeds` with no reader accesses and a fresh shape fit.
fn reader_less(
    feeds: &[FeedRecord],
    states: &HashMap<String, FeedState>,
    now: i64,
    s: &PlannerSettings,
) -> (Vec<FeedModel>, ModelCounts) {
    models(
        feeds,
        states,
        &|_| vec![0.0; BINS],
        now,
        s,
        &mut Default::default(),
    )
}
use crate::control::feedstate::FetchObservation;
use crate::control::relearn::Replanner;

const H: i64 = 3_600_000;

fn feed(i: usize) -> FeedRecord {
    FeedRecord {
        id: format!("f{i}"),
        url: format!("http://h{i}.test/feed"),
        host: format!("h{i}.test"),
        weight: 1.0,
    }
}

/// Fetched daily at `fetch_at` (ms into the day) for `days` days before `now`, each
/// fetch finding `items_of(day)` (id, date) new.
fn fetched_daily(
    days: i64,
    now: i64,
    fetch_at: i64,
    items_of: impl Fn(i64) -> Vec<(u64, Option<i64>)>,
) -> FeedState {
    let mut st = FeedState::default();
    for d in (0..days).rev() {
        let day = now / DAY_MS - d;
        st.observe(
            &FetchObservation {
                finished_ms: day * DAY_MS + fetch_at,
                answered: true,
                new_items: items_of(day),
                ..Default::default()
            },
            28 * DAY_MS,
        );
    }
    st
}

/// Fetched daily at 23:00 for `days` days before `now`; `busy` postings a day at 10:00,
/// `quiet` on Saturdays and Sundays (days 2 and 3 of the epoch's Thursday-based week).
fn weekend_feed(busy: usize, quiet: usize, days: i64, now: i64) -> FeedState {
    fetched_daily(days, now, 23 * H, |day| {
        let n = if matches!(day.rem_euclid(7), 2 | 3) {
            quiet
        } else {
            busy
        };
        (0..n)
            .map(|k| {
                (
                    (day * 100 + k as i64) as u64,
                    Some(day * DAY_MS + 10 * H + k as i64),
                )
            })
            .collect()
    })
}

#[test]
fn weekly_plans_learn_quiet_weekends_and_count_per_day_outside() {
    let now = 20_000 * DAY_MS;
    let feeds: Vec<FeedRecord> = (0..30).map(feed).collect();
    let states: HashMap<String, FeedState> = feeds
        .iter()
        .map(|f| (f.id.clone(), weekend_feed(12, 2, 21, now)))
        .collect();
    let s = PlannerSettings {
        weekly: true,
        window_days: 28.0,
        slots: 288,
        ..PlannerSettings::default()
    };
    let (learned, counts) = reader_less(&feeds, &states, now, &s);
    assert_eq!(counts.week_shapes[0], 0, "{:?}", counts.week_shapes);
    let m = &learned[0];
    assert_eq!(m.post_bins.len(), 168);
    let day = |d: usize| m.post_bins[d * 24..(d + 1) * 24].iter().sum::<f32>();
    // Saturday (day 2) against Monday (day 4) of the epoch week.
    assert!(day(2) < 0.5 * day(4), "{} vs {}", day(2), day(4));
    assert_eq!(m.min_level, 1, "once a week, counted per week");
    assert_eq!(m.max_level, 7 * 288);
    // The days' prices step a few times a round and are kept between rounds.
    let mut replanner = Replanner::new(s.clone());
    let mut out = replanner.plan(&feeds, learned.clone()).unwrap();
    for _ in 0..5 {
        out = replanner.plan(&feeds, learned.clone()).unwrap();
    }
    assert!((out.budget_per_day - 120.0).abs() < 1e-9);
    assert!(
        (out.fetches_per_day - 120.0).abs() < 1.0,
        "{}",
        out.fetches_per_day
    );
    assert_eq!(out.specs["f0"].period_seconds, 7.0 * 86_400.0);
    // The weekend is quiet, but the workers hold every day to its budget: the days' prices
    // ask each day of the week its share of the week's fetches (`plan::days`).
    let mut per_day = [0usize; 7];
    for spec in out.specs.values() {
        for &t in &spec.offsets_seconds {
            per_day[((t / 86_400.0) as usize).min(6)] += 1;
        }
    }
    for n in per_day {
        assert!(n.abs_diff(120) <= 6, "{per_day:?}");
    }
    // A round that refills the rest of a day or pays back fetches made ahead plans at the
    // prices as they stand: its budget's balance over the week is not the budget's.
    let settled = replanner.day_prices().clone();
    assert!(settled.any(), "{settled:?}");
    for share in [0.05, 1.5] {
        replanner.set_budget_share(share);
        let o = replanner.plan(&feeds, learned.clone()).unwrap();
        assert!((o.budget_share - share).abs() < 1e-9, "{}", o.budget_share);
        assert_eq!(replanner.day_prices(), &settled, "at a share of {share}");
    }
    // The same feeds without a weekend: the daily shape is kept.
    let flat: HashMap<String, FeedState> = feeds
        .iter()
        .map(|f| (f.id.clone(), weekend_feed(12, 12, 21, now)))
        .collect();
    let (_, counts) = reader_less(&feeds, &flat, now, &s);
    assert_eq!(counts.week_shapes[0], 30, "{:?}", counts.week_shapes);
}

/// Fetched daily at 23:30 for `days` days before `now`, posting at `hours` on every
/// `every`-th day.
fn hourly_feed(hours: &[i64], every: i64, days: i64, now: i64) -> FeedState {
    fetched_daily(days, now, 23 * H + H / 2, |day| {
        if day % every != 0 {
            return Vec::new();
        }
        hours
            .iter()
            .enumerate()
            .map(|(k, h)| ((day * 100 + k as i64) as u64, Some(day * DAY_MS + h * H)))
            .collect()
    })
}

#[test]
fn feeds_that_woke_up_or_stopped_are_counted_for_the_regime_gauge() {
    let now = 20_000 * DAY_MS;
    let first = now / DAY_MS - 27;
    let feeds: Vec<FeedRecord> = (0..12).map(feed).collect();
    let daily_from = |from: i64, to: i64| {
        fetched_daily(28, now, 23 * H + H / 2, move |day| {
            if (first + from..first + to).contains(&day) {
                vec![(day as u64, Some(day * DAY_MS + 9 * H))]
            } else {
                Vec::new()
            }
        })
    };
    // Ten steady feeds, one that woke up on day 20, one that stopped on day 10.
    let mut states: HashMap<String, FeedState> = (0..10)
        .map(|i| (format!("f{i}"), daily_from(0, 28)))
        .collect();
    states.insert("f10".into(), daily_from(20, 28));
    states.insert("f11".into(), daily_from(0, 10));
    let (learned, counts) = reader_less(&feeds, &states, now, &PlannerSettings::default());
    assert_eq!((counts.regime_rising, counts.regime_falling), (1, 1));
    let rate = |i: usize| {
        learned[i]
            .post_bins
            .iter()
            .map(|&b| f64::from(b))
            .sum::<f64>()
    };
    // The woken feed is learned above its window's 8 / 28 a day, the stopped one below
    // its 10 / 28.
    assert!(rate(10) > 0.4, "{}", rate(10));
    assert!(rate(11) < 0.2, "{}", rate(11));
}

#[test]
fn a_quiet_feeds_hours_lean_on_the_pool_by_pseudo_postings() {
    let now = 20_000 * DAY_MS;
    let feeds: Vec<FeedRecord> = (0..21).map(feed).collect();
    // Twenty busy feeds spread over the day; one quiet feed posting at 03:00 once a week.
    let mut states: HashMap<String, FeedState> = (0..20)
        .map(|i| {
            let hours: Vec<i64> = (0..8).map(|k| (i + 3 * k) % 24).collect();
            (format!("f{i}"), hourly_feed(&hours, 1, 21, now))
        })
        .collect();
    states.insert("f20".into(), hourly_feed(&[3], 7, 21, now));
    let share_at = |postings: f64, feed: usize, hour: usize| {
        let s = PlannerSettings {
            shrinkage: 1.0,
            tune_shrinkage: false,
            tune_half_life: false,
            half_life_days: 0.0,
            shape_pseudo_postings: postings,
            // The rule under test is the one pooled shape's.
            shape_mixture: 0,
            ..PlannerSettings::default()
        };
        let (learned, _) = reader_less(&feeds, &states, now, &s);
        let bins = &learned[feed].post_bins;
        bins[hour] as f64 / bins.iter().map(|&b| b as f64).sum::<f64>()
    };
    // Three postings in three weeks, all at 03:00: with pseudo-days alone (one day of a
    // pool that is nearly flat) that hour takes most of the feed's mass; with eight
    // pseudo-postings it takes about 3 / (3 + 8) plus its pooled share.
    let alone = share_at(0.0, 20, 3);
    let pooled = share_at(8.0, 20, 3);
    assert!(alone > 0.8, "{alone}");
    assert!(pooled > 0.25 && pooled < 0.35, "{pooled}");
    // A busy feed (8 postings a day) has far more than eight postings: unchanged.
    let busy_alone = share_at(0.0, 0, 0);
    let busy_pooled = share_at(8.0, 0, 0);
    assert!(
        (busy_alone - busy_pooled).abs() < 1e-6,
        "{busy_alone} {busy_pooled}"
    );
}

#[test]
fn watched_days_split_spread_postings_and_partial_days() {
    let mut st = FeedState {
        observed_since_ms: Some(10 * DAY_MS + 12 * H),
        ..FeedState::default()
    };
    st.postings_ms.push_back(11 * DAY_MS + H);
    // One posting known only to lie between 18:00 on day 11 and 06:00 on day 12.
    st.spread_ms
        .push_back((11 * DAY_MS + 18 * H, 12 * DAY_MS + 6 * H));
    let days = watched_days(&st, 0, 12 * DAY_MS + 12 * H);
    assert_eq!(days.len(), 3);
    assert_eq!(days[0].exposure, 0.5);
    assert_eq!(days[1].exposure, 1.0);
    assert_eq!(days[2].exposure, 0.5);
    assert_eq!(days[0].weekday, 3, "day 10 of the epoch is a Sunday");
    assert_eq!(days[1].count, 1.5);
    assert_eq!(days[2].count, 0.5);
}

/// Bad input from publishers: every model stays finite and sensible, and no single
/// feed takes the budget (docs/PLANNER.md, "What bad input does to a model").
#[test]
fn bad_dates_bursts_and_back_dated_floods_give_finite_rates_and_no_budget_swing() {
    let window = 28 * DAY_MS;
    let start = 20_000 * DAY_MS;
    let year = 365 * DAY_MS;
    // Feed 0..40 normal; then: undated, future-dated, dated 1970, a flood of 1,000
    // back-dated items on day 20, one posting in the whole time, 500 in one hour.
    let kinds = ["undated", "future", "epoch", "flood", "yearly", "burst"];
    let feeds: Vec<FeedRecord> = (0..40 + kinds.len()).map(feed).collect();
    let mut states: HashMap<String, FeedState> = HashMap::new();
    for (f, rec) in feeds.iter().enumerate() {
        let kind = f.checked_sub(40).map(|k| kinds[k]);
        let mut st = FeedState::default();
        let mut id = (f as u64) << 32;
        for d in 0..28i64 {
            let fetch = start + d * DAY_MS + 12 * H;
            let mut items: Vec<(u64, Option<i64>)> = Vec::new();
            let mut push = |items: &mut Vec<(u64, Option<i64>)>, t: Option<i64>| {
                id += 1;
                items.push((id, t));
            };
            for k in 0..2 {
                let at = fetch - (3 + 8 * k) * H;
                match kind {
                    None | Some("flood") => push(&mut items, Some(at)),
                    Some("undated") => push(&mut items, None),
                    Some("future") => push(&mut items, Some(at + 10 * year)),
                    Some("epoch") => push(&mut items, Some(0)),
                    _ => {}
                }
            }
            match kind {
                Some("flood") if d == 20 => {
                    for k in 0..1_000 {
                        push(&mut items, Some(fetch - year + k * 60_000));
                    }
                }
                Some("yearly") if d == 3 => push(&mut items, Some(fetch - H)),
                Some("burst") if d == 25 => {
                    for k in 0..500 {
                        push(&mut items, Some(fetch - 2 * H + k * 7_000));
                    }
                }
                _ => {}
            }
            st.observe(
                &FetchObservation {
                    finished_ms: fetch,
                    answered: true,
                    new_items: items,
                    items_in_document: 20,
                    ..Default::default()
                },
                window,
            );
        }
        states.insert(rec.id.clone(), st);
    }
    let now = start + 27 * DAY_MS + 13 * H;
    let s = PlannerSettings {
        budget: crate::control::relearn::Budget::PerFeedPerDay(1.0),
        slots: 288,
        ..PlannerSettings::default()
    };
    let (learned, _) = reader_less(&feeds, &states, now, &s);
    let rate = |i: usize| learned[i].post_bins.iter().map(|&b| b as f64).sum::<f64>();
    for (i, m) in learned.iter().enumerate() {
        assert!(
            m.post_bins.iter().all(|b| b.is_finite() && *b >= 0.0),
            "feed {i}: {:?}",
            m.post_bins
        );
    }
    let normal = rate(0);
    assert!((normal - 2.0).abs() < 0.4, "{normal}");
    // Undated, future and 1970 dates: counted between fetches, at the same rate.
    for (k, kind) in kinds.iter().enumerate().take(3) {
        let r = rate(40 + k);
        assert!((r / normal - 1.0).abs() < 0.25, "{kind}: {r} vs {normal}");
    }
    // The flood counts in the interval it appeared in: a high rate, but finite.
    let flood = rate(43);
    assert!(flood > normal && flood < 60.0, "{flood}");
    // One posting in the whole time: well below the typical feed.
    assert!(rate(44) < 0.5 * normal, "{}", rate(44));
    // 500 in an hour: a high, finite rate, within twice the hour's postings over the days
    // watched (recent postings weigh more, and the feed's level now is its burst's).
    let raw = 500.0 / ((now - start) as f64 / DAY_MS as f64);
    assert!(
        rate(45) > normal && rate(45) < 2.0 * raw,
        "{} vs {raw}",
        rate(45)
    );
    // The plan: no feed takes more than a tenth of the budget.
    let out = Replanner::new(s.clone()).plan(&feeds, learned).unwrap();
    let budget = out.budget_per_day;
    for (id, spec) in &out.specs {
        let per_day = spec.offsets_seconds.len() as f64 / (spec.period_seconds / 86_400.0);
        assert!(per_day <= 0.1 * budget, "{id}: {per_day} of {budget}");
    }
}

/// Feeds with log-normal rates (σ = 1, mean 4 a day: the wall-clock farm's), watched two
/// days with postings at random times, and every fetch seeing them.
fn log_normal_population(n: usize, seed: u64) -> (Vec<FeedRecord>, HashMap<String, FeedState>) {
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, LogNormal, Poisson};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let rates = LogNormal::new(4f64.ln() - 0.5, 1.0).unwrap();
    let now = 30 * DAY_MS;
    let feeds: Vec<FeedRecord> = (0..n).map(feed).collect();
    let states = feeds
        .iter()
        .map(|f| {
            let r: f64 = rates.sample(&mut rng);
            let k = Poisson::new(2.0 * r).map_or(0, |p| p.sample(&mut rng) as usize);
            let mut st = FeedState {
                observed_since_ms: Some(now - 2 * DAY_MS),
                last_answered_ms: Some(now),
                ..FeedState::default()
            };
            let mut times: Vec<i64> = (0..k).map(|_| now - rng.gen_range(1..2 * DAY_MS)).collect();
            times.sort_unstable();
            st.postings_ms = times.into();
            (f.id.clone(), st)
        })
        .collect();
    (feeds, states)
}

/// Four fetches a day, no exploration and no forward calibration: the rates as fitted.
fn prior_settings() -> PlannerSettings {
    PlannerSettings {
        budget: crate::control::relearn::Budget::PerFeedPerDay(4.0),
        slots: 96,
        explore_min_postings: 0,
        calibrate_rates: false,
        ..PlannerSettings::default()
    }
}

#[test]
fn silent_feeds_are_read_at_what_silent_feeds_of_their_population_post() {
    let (feeds, states) = log_normal_population(600, 11);
    let now = 30 * DAY_MS;
    let s = prior_settings();
    let daily = |m: &FeedModel| m.post_bins.iter().map(|&v| f64::from(v)).sum::<f64>();
    let silent: Vec<usize> = (0..feeds.len())
        .filter(|&f| states[&feeds[f].id].postings_ms.is_empty())
        .collect();
    assert!(silent.len() >= 10, "{} silent feeds", silent.len());
    let mean_silent = |models: &[FeedModel]| {
        silent.iter().map(|&f| daily(&models[f])).sum::<f64>() / silent.len() as f64
    };
    let (with, counts) = reader_less(&feeds, &states, now, &s);
    let (without, plain) = reader_less(
        &feeds,
        &states,
        now,
        &PlannerSettings {
            rate_prior: false,
            ..s.clone()
        },
    );
    // Under a log-normal (σ = 1, mean 4) a feed silent two days posts about 0.71 a day.
    let (w, wo) = (mean_silent(&with), mean_silent(&without));
    assert!(
        (0.45..1.1).contains(&w),
        "silent feeds under the fitted distribution: {w:.3}"
    );
    assert!(w > 1.3 * wo, "fitted {w:.3} against pseudo-days {wo:.3}");
    assert!(
        counts.rate_prior_mean > 2.5 && counts.rate_prior_mean < 6.0,
        "{counts:?}"
    );
    assert_eq!(plain.rate_prior_mean, 0.0);
    // A feed with many postings keeps about its own rate either way.
    let busy = (0..feeds.len())
        .max_by_key(|&f| states[&feeds[f].id].postings_ms.len())
        .unwrap();
    let own = states[&feeds[busy].id].postings_ms.len() as f64 / 2.0;
    assert!(
        (daily(&with[busy]) / own - 1.0).abs() < 0.25,
        "busiest: {:.2} a day against its own {own:.2}",
        daily(&with[busy])
    );
}

#[test]
fn rates_wait_for_most_of_a_day_watched_before_the_fitted_distribution() {
    let (feeds, mut states) = log_normal_population(300, 12);
    let now = 30 * DAY_MS;
    let s = prior_settings();
    // Watched since six hours ago: the hours seen so far are not a day's rate.
    for st in states.values_mut() {
        st.observed_since_ms = Some(now - 6 * H);
        while st.postings_ms.front().is_some_and(|&t| t < now - 6 * H) {
            st.postings_ms.pop_front();
        }
    }
    let (_, counts) = reader_less(&feeds, &states, now, &s);
    assert_eq!(counts.rate_prior_mean, 0.0, "{counts:?}");
    // A day later the fit stands.
    for st in states.values_mut() {
        st.observed_since_ms = Some(now - DAY_MS);
    }
    let (_, counts) = reader_less(&feeds, &states, now, &s);
    assert!(counts.rate_prior_mean > 0.0, "{counts:?}");
}
