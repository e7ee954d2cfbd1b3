//! Tests of the replanner and the live models it plans with.

use super::*;
use crate::control::feedstate::FetchObservation;
use crate::control::shapes::ShapeCache;
use crate::plan::alloc::ceil_level;

fn feed(i: usize) -> FeedRecord {
    FeedRecord {
        id: format!("f{i}"),
        url: format!("http://h{}.test/f{i}", i % 3),
        host: format!("h{}.test", i % 3),
        weight: 1.0,
    }
}

/// A feed posting `per_day` times a day at hour `hour`, watched for `days` days.
fn watched(per_day: usize, hour: i64, days: i64, now: i64) -> FeedState {
    let mut st = FeedState::default();
    let h = 3_600_000;
    for d in (0..days).rev() {
        let day_start = (now / DAY_MS - d) * DAY_MS;
        let items: Vec<(u64, Option<i64>)> = (0..per_day)
            .map(|k| {
                (
                    (d * 100 + k as i64) as u64,
                    Some(day_start + hour * h + k as i64),
                )
            })
            .collect();
        st.observe(
            &FetchObservation {
                finished_ms: day_start + 23 * h,
                answered: true,
                new_items: items,
                ..Default::default()
            },
            14 * DAY_MS,
        );
    }
    st
}

/// The models of `feeds` with no reader accesses, under settings `s`.
fn models_with(
    feeds: &[FeedRecord],
    states: &HashMap<String, FeedState>,
    now: i64,
    s: &PlannerSettings,
) -> (Vec<FeedModel>, ModelCounts) {
    let mut shapes = ShapeCache::default();
    models(feeds, states, &|_| vec![0.0; BINS], now, s, &mut shapes)
}

/// The models of `feeds` with no reader accesses, under the default settings.
fn default_models(
    feeds: &[FeedRecord],
    states: &HashMap<String, FeedState>,
    now: i64,
) -> (Vec<FeedModel>, ModelCounts) {
    models_with(feeds, states, now, &PlannerSettings::default())
}

#[test]
fn a_new_populations_schedules_are_turned_apart_and_keep_their_spacing() {
    // Nothing posted yet: every model is flat, and the solver alone would fetch every feed
    // at the same minutes.
    let feeds: Vec<FeedRecord> = (0..40).map(feed).collect();
    let models: Vec<FeedModel> = (0..40)
        .map(|i| FeedModel {
            weight: 1.0,
            post_bins: vec![0.1; BINS],
            // Readers do not matter to the delay metric.
            peaks: Vec::new(),
            access_bins: (0..BINS).map(|b| b as f32).collect(),
            min_level: 1,
            max_level: 1440,
            host: Some(i),
            document: None,
        })
        .collect();
    let s = PlannerSettings {
        budget: Budget::PerFeedPerDay(2.0),
        min_fetches_per_day: 1.0,
        ..PlannerSettings::default()
    };
    let out = Replanner::new(s.clone())
        .plan(&feeds, models.clone())
        .unwrap();
    let firsts: std::collections::BTreeSet<i64> = out
        .specs
        .values()
        .map(|spec| {
            assert_eq!(spec.offsets_seconds.len(), 2);
            let gap = spec.offsets_seconds[1] - spec.offsets_seconds[0];
            assert!((gap - 43_200.0).abs() < 1e-6, "{spec:?}");
            spec.offsets_seconds[0] as i64
        })
        .collect();
    assert!(firsts.len() >= 30, "{} distinct first times", firsts.len());
    // The same feeds keep their turn from round to round.
    let again = Replanner::new(s.clone())
        .plan(&feeds, models.clone())
        .unwrap();
    assert_eq!(out.specs, again.specs);
    // A feed with hours of its own keeps the solver's times: one posting hour, 09:00.
    // (Hours are spread onto minutes piecewise-linearly, so the mass runs into 10:00.)
    let mut shaped = models;
    shaped[0].post_bins = (0..BINS).map(|b| if b == 9 { 2.0 } else { 0.0 }).collect();
    let out = Replanner::new(s).plan(&feeds, shaped).unwrap();
    let times = &out.specs["f0"].offsets_seconds;
    assert!(
        times.iter().all(|&t| (36_000.0..39_600.0).contains(&t)),
        "fetched within the hour after the 9 o'clock one: {times:?}"
    );
}

#[test]
fn models_follow_observations_and_unknown_feeds_explore() {
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let feeds: Vec<FeedRecord> = (0..3).map(feed).collect();
    let mut states = HashMap::new();
    states.insert("f0".to_string(), watched(8, 9, 10, now));
    states.insert("f1".to_string(), watched(1, 20, 10, now));
    // Three feeds at 4 a day leave 11.6 fetches above the minimums: a fifth of that
    // pays for raising one from once a week to once a day, 5% does not.
    let s = PlannerSettings {
        explore_share: 0.2,
        ..PlannerSettings::default()
    };
    let (m, counts) = models_with(&feeds, &states, now, &s);
    let rate = |i: usize| m[i].post_bins.iter().map(|&b| b as f64).sum::<f64>();
    // 80 postings over ~10 days observed (first fetch at 23:00 of the first day).
    assert!((rate(0) - 8.0).abs() < 0.9, "{}", rate(0));
    assert!((rate(1) - 1.0).abs() < 0.2, "{}", rate(1));
    assert!(
        m[0].post_bins[9] > 0.8 * 8.0,
        "the 9 o'clock peak is learned"
    );
    assert!(
        (rate(2) / rate(0) - 1.0).abs() < 0.1,
        "an unwatched feed gets a typical rate: {} vs {}",
        rate(2),
        rate(0)
    );
    assert_eq!(counts.exploring, 1);
    assert_eq!(counts.capacity_floors, 0, "documents of unknown size");
    assert_eq!(m[2].min_level, 1);
    let (m, counts) = default_models(&feeds, &states, now);
    assert_eq!(counts.exploring, 0);
    assert_eq!(m[2].min_level, ceil_level(1.0 / 7.0));
}

#[test]
fn hours_not_yet_watched_are_not_read_as_quiet() {
    let h = 3_600_000;
    let start = 1000 * DAY_MS;
    let now = start + 6 * h;
    let feeds: Vec<FeedRecord> = (0..2).map(feed).collect();
    let mut states = HashMap::new();
    for (i, f) in feeds.iter().enumerate() {
        let mut st = FeedState::default();
        // Watched from midnight: two postings an hour in hours 0-5.
        st.observe(
            &FetchObservation {
                finished_ms: start,
                answered: true,
                ..Default::default()
            },
            14 * DAY_MS,
        );
        let items = (0..12)
            .map(|k| ((i * 100 + k) as u64, Some(start + k as i64 * h / 2 + 1)))
            .collect();
        st.observe(
            &FetchObservation {
                finished_ms: now,
                answered: true,
                new_items: items,
                ..Default::default()
            },
            14 * DAY_MS,
        );
        states.insert(f.id.clone(), st);
    }
    let (m, _) = default_models(&feeds, &states, now);
    let b = &m[0].post_bins;
    assert!(b[2] > 1.0, "watched hours keep their rate: {b:?}");
    assert!(
        b[15] > 0.1,
        "an unwatched hour gets the prior, not zero: {b:?}"
    );
    assert_eq!(hour_exposure(start, now)[3], 1.0);
    assert_eq!(hour_exposure(start, now)[7], 0.0);
    assert_eq!(hour_exposure(start - 2 * DAY_MS, now)[7], 2.0);
}

#[test]
fn undated_postings_spread_over_the_hours_between_fetches() {
    let h = 3_600_000;
    let start = 1000 * DAY_MS;
    let mut st = FeedState::default();
    let obs = |at: i64, items: Vec<(u64, Option<i64>)>| FetchObservation {
        finished_ms: at,
        answered: true,
        new_items: items,
        ..Default::default()
    };
    st.observe(&obs(start, vec![]), 14 * DAY_MS);
    // Every day: fetches at 06:00 and 12:00; one undated item shows up at 12:00.
    for d in 0..10i64 {
        let day = start + d * DAY_MS;
        st.observe(&obs(day + 6 * h, vec![]), 14 * DAY_MS);
        st.observe(&obs(day + 12 * h, vec![(d as u64, None)]), 14 * DAY_MS);
    }
    let now = start + 10 * DAY_MS;
    let feeds = vec![feed(0)];
    let states: HashMap<String, FeedState> = [("f0".to_string(), st)].into();
    let (m, _) = default_models(&feeds, &states, now);
    let b = &m[0].post_bins;
    let inside: f32 = b[6..12].iter().sum();
    let total: f32 = b.iter().sum();
    assert!(inside / total > 0.8, "mass between 06:00 and 12:00: {b:?}");
    assert!((b[7] - b[10]).abs() < 0.02, "evenly spread: {b:?}");
}

#[test]
fn replans_resolve_only_changed_feeds_and_fetch_before_the_peak() {
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let n = 30;
    let feeds: Vec<FeedRecord> = (0..n).map(feed).collect();
    let mut states: HashMap<String, FeedState> = (0..n)
        .map(|i| (format!("f{i}"), watched(4, 6 + 2 * (i % 6) as i64, 7, now)))
        .collect();
    let mut r = Replanner::new(PlannerSettings {
        budget: Budget::PerFeedPerDay(2.0),
        ..Default::default()
    });
    let access = |_: &str| vec![0.0; BINS];
    let (m, _) = r.models(&feeds, &states, &access, now);
    let first = r.plan(&feeds, m).unwrap();
    assert!(first.fresh);
    assert!((first.fetches_per_day - 2.0 * n as f64).abs() < 1e-6);
    // f0 posts in the 06:00 hour: one of its fetches follows that hour closely.
    let f0 = &first.specs["f0"];
    assert!(
        f0.offsets_seconds
            .iter()
            .any(|&o| (6.5 * 3600.0..8.0 * 3600.0).contains(&o)),
        "{:?}",
        f0.offsets_seconds
    );
    let (m, _) = r.models(&feeds, &states, &access, now);
    let same = r.plan(&feeds, m).unwrap();
    assert!(!same.fresh);
    assert_eq!(same.resolved, 0);
    assert_eq!(same.specs, first.specs);
    // One feed learns more postings: only it is re-solved.
    states.insert("f3".to_string(), watched(12, 15, 7, now));
    let (m, _) = r.models(&feeds, &states, &access, now);
    let next = r.plan(&feeds, m).unwrap();
    assert!(!next.fresh);
    assert!(next.resolved >= 1 && next.resolved < 4, "{}", next.resolved);
    // A changed feed set solves afresh.
    let (m, _) = r.models(&feeds[..5], &states, &access, now);
    assert!(r.plan(&feeds[..5], m).unwrap().fresh);
    assert!(next.specs.len() == n);
}

#[test]
fn host_caps_bound_the_plan_and_the_unspent_budget_is_reported() {
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let n = 30;
    let feeds: Vec<FeedRecord> = (0..n).map(feed).collect();
    // Busy feeds (12 a day) and quiet ones (1 a day) on each of the three hosts.
    let states: HashMap<String, FeedState> = (0..n)
        .map(|i| {
            let per_day = if i < 6 { 12 } else { 1 };
            (format!("f{i}"), watched(per_day, 9, 7, now))
        })
        .collect();
    let settings = PlannerSettings {
        budget: Budget::PerFeedPerDay(4.0),
        min_fetches_per_day: 0.25,
        host_fetches_per_day: Some(12.0),
        ..Default::default()
    };
    let mut r = Replanner::new(settings.clone());
    let access = |_: &str| vec![0.0; BINS];
    let (m, _) = r.models(&feeds, &states, &access, now);
    let out = r.plan(&feeds, m).unwrap();
    let mut per_host: HashMap<String, f64> = HashMap::new();
    for f in &feeds {
        let spec = &out.specs[&f.id];
        let rate = spec.offsets_seconds.len() as f64 * 86_400.0 / spec.period_seconds;
        *per_host.entry(f.host.clone()).or_default() += rate;
    }
    for (h, used) in &per_host {
        assert!(*used <= 12.0 + 1e-9, "host {h} planned {used} > 12");
    }
    assert_eq!(out.host_limited.hosts, 3);
    assert_eq!(out.host_limited.hosts_at_cap, 3);
    assert!(
        (out.host_limited.unspent_per_day - (120.0 - out.fetches_per_day)).abs() < 1e-9
            && out.host_limited.unspent_per_day > 80.0,
        "{:?}",
        out.host_limited
    );
    // Within a full host the busy feeds keep the fetches.
    let rate = |id: &str| {
        let s = &out.specs[id];
        s.offsets_seconds.len() as f64 * 86_400.0 / s.period_seconds
    };
    assert!(
        rate("f0") >= 2.0 * rate("f9"),
        "{} vs {}",
        rate("f0"),
        rate("f9")
    );
    // Uncapped, the same round spends the budget.
    let mut free = Replanner::new(PlannerSettings {
        host_fetches_per_day: None,
        ..settings.clone()
    });
    let (m, _) = free.models(&feeds, &states, &access, now);
    let all = free.plan(&feeds, m).unwrap();
    assert!(
        all.host_limited.unspent_per_day < 1.0,
        "{:?}",
        all.host_limited
    );
    assert_eq!(all.host_limited.hosts_at_cap, 0);
    // A cap below the per-feed minimum is refused by validation.
    let bad = PlannerSettings {
        host_fetches_per_day: Some(0.1),
        ..settings.clone()
    };
    assert!(bad.validate().is_err());
}

#[test]
fn the_shapes_pseudo_postings_are_refused_outside_their_range_and_finite_inside() {
    for bad in [f64::NAN, -1.0, 1e308, f64::INFINITY] {
        let s = PlannerSettings {
            shape_pseudo_postings: bad,
            ..PlannerSettings::default()
        };
        let e = s.validate().unwrap_err();
        assert!(e.contains("pseudo-postings"), "{bad}: {e}");
    }
    // The largest allowed, on a feed that never posted and one that did: finite models.
    let s = PlannerSettings {
        shape_pseudo_postings: MAX_SHAPE_PSEUDO_POSTINGS,
        ..PlannerSettings::default()
    };
    s.validate().unwrap();
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let feeds: Vec<FeedRecord> = (0..2).map(feed).collect();
    let mut states = HashMap::new();
    states.insert("f0".to_string(), watched(8, 9, 10, now));
    states.insert("f1".to_string(), watched(0, 9, 10, now));
    let (m, _) = models_with(&feeds, &states, now, &s);
    assert!(m
        .iter()
        .all(|m| m.post_bins.iter().all(|b| b.is_finite() && *b >= 0.0)));
}

#[test]
fn a_budget_past_one_fetch_per_slot_is_refused_or_capped() {
    let per_feed = PlannerSettings {
        budget: Budget::PerFeedPerDay(1e308),
        ..PlannerSettings::default()
    };
    let e = per_feed.validate().unwrap_err();
    assert!(e.contains("one fetch per slot"), "{e}");
    // A total budget cannot be checked without the feeds: it is capped where it is
    // planned, and a plan is made.
    let total = PlannerSettings {
        budget: Budget::PerDay(1e308),
        slots: 24,
        ..PlannerSettings::default()
    };
    total.validate().unwrap();
    assert_eq!(total.plan_config(3).budget, 72.0);
    let feeds: Vec<FeedRecord> = (0..3).map(feed).collect();
    let states: HashMap<String, FeedState> = HashMap::new();
    let access = |_: &str| Vec::new();
    let (m, _) = models(
        &feeds,
        &states,
        &access,
        1000 * DAY_MS,
        &total,
        &mut ShapeCache::default(),
    );
    let out = Replanner::new(total).plan(&feeds, m).unwrap();
    assert!(
        out.fetches_per_day <= 72.0 + 1e-9,
        "{}",
        out.fetches_per_day
    );
}

#[test]
fn a_feed_posting_faster_than_its_document_holds_gets_a_floor() {
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let feeds: Vec<FeedRecord> = (0..2).map(feed).collect();
    // 40 postings a day, all in the 09:00 hour, on both feeds; f0's document holds 10
    // items, f1's is of unknown size.
    let mut small = watched(40, 9, 7, now);
    small.doc_capacity = 10;
    let states: HashMap<String, FeedState> = [
        ("f0".to_string(), small),
        ("f1".to_string(), watched(40, 9, 7, now)),
    ]
    .into();
    // Both feeds post their 40 within the same 40 ms every day: on a timer. The floor at an
    // hour's resolution first (the peak off), then with the peak.
    let s = PlannerSettings {
        lost_posting_hours: None,
        timer_peaks: false,
        ..PlannerSettings::default()
    };
    let (m, counts) = models_with(&feeds, &states, now, &s);
    assert_eq!(counts.capacity_floors, 1);
    // The same 40 every day at the same hour are no clump: 70% of a 10-item document holds
    // 7 postings, so at least 40 / 7 → 6 fetches a day, placed where the postings are (at
    // the 09:00 burst), not evenly spaced at the burst's rate (about 190 a day).
    assert!((6..60).contains(&m[0].min_level), "{}", m[0].min_level);
    assert!(m[1].min_level <= 1, "{}", m[1].min_level);
    // What the floor holds beyond the configured minimum, shown to operators.
    let held = level_rate(m[0].min_level) - level_rate(s.levels().0);
    assert!(held >= 5.0, "{held}");
    assert!(
        (counts.capacity_floor_fetches_per_day - held / s.days_per_period()).abs() < 1e-9,
        "{counts:?}"
    );
    // The budget cannot carry it: the floor is dropped, not the plan.
    let mut r = Replanner::new(PlannerSettings {
        budget: Budget::PerDay(6.0),
        ..s
    });
    let out = r.plan(&feeds, m).unwrap();
    assert_eq!(out.host_limited.floors_lowered, 1);
    // With the peak the batch lands in one slot: no fetch keeps 40 postings within a
    // 10-item document, and the floor does not spend the fetches that would try (the
    // search's top, 137 a day), only the few a slot that full allows.
    let (m, counts) = models_with(
        &feeds,
        &states,
        now,
        &PlannerSettings {
            timer_peaks: true,
            ..s
        },
    );
    assert_eq!(counts.timer_feeds, 2);
    assert!(!m[0].peaks.is_empty());
    assert!((1..=3).contains(&m[0].min_level), "{}", m[0].min_level);
}

#[test]
fn a_feed_posting_faster_than_its_document_holds_has_its_losses_priced() {
    let now = 1000 * DAY_MS + 23 * 3_600_000 + 1;
    let feeds: Vec<FeedRecord> = (0..3).map(feed).collect();
    // As above, and a third feed posting 4 a day at 20:00 to take the rest of the budget.
    let mut small = watched(40, 9, 7, now);
    small.doc_capacity = 10;
    let states: HashMap<String, FeedState> = [
        ("f0".to_string(), small),
        ("f1".to_string(), watched(40, 9, 7, now)),
        ("f2".to_string(), watched(4, 20, 7, now)),
    ]
    .into();
    let planned = |hours: f64| {
        let s = PlannerSettings {
            budget: Budget::PerDay(12.0),
            lost_posting_hours: Some(hours),
            // Hourly models: with the peak f0's 40 land in one slot, where no fetch saves
            // any (the floor test above).
            timer_peaks: false,
            ..PlannerSettings::default()
        };
        let (m, counts) = models_with(&feeds, &states, now, &s);
        // No floor is raised: the document goes to the planner.
        assert_eq!(counts.capacity_floors, 0);
        assert_eq!(m[0].min_level, s.levels().0);
        let doc = m[0].document.expect("f0's document");
        assert_eq!((doc.items, doc.clump), (10.0, 1.0));
        assert!((doc.lost_cost - hours * 3600.0 * m[0].weight).abs() < 1e-6);
        assert!(m[1].document.is_none(), "f1's size is not known");
        let out = Replanner::new(s).plan(&feeds, m).unwrap();
        let f0 = out.specs.iter().find(|(id, _)| *id == "f0").unwrap();
        (f0.1.offsets_seconds.len(), out.expected_lost_per_day)
    };
    let (free_fetches, free_lost) = planned(0.0);
    let (week_fetches, week_lost) = planned(168.0);
    // Unpriced, f0's fetches at its 40-posting hour still lose a few a day off its 10
    // items (5 fetches: 3.5 a day); priced at a week of delay a posting, it takes a fetch
    // from the others and loses half as many.
    assert!(free_lost > 1.0, "{free_lost}");
    assert!(
        week_fetches > free_fetches,
        "{week_fetches} vs {free_fetches}"
    );
    assert!(week_lost < free_lost / 1.5, "{week_lost} vs {free_lost}");
}

#[test]
fn the_plan_asks_a_little_less_than_the_daily_allowance() {
    // The allowance is the day's budget rounded down; with feeds fetched less than daily
    // the plan stays a quarter of a fetch under it, or 1% of a small day's budget.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(held_budget(42.5, 1.0, true), 41.75));
    assert!(close(held_budget(42.5, 1.0, false), 42.0));
    assert!(close(held_budget(461.0, 1.0, true), 460.75));
    assert!(close(held_budget(461.0, 1.0, false), 461.0));
    assert!(close(held_budget(5.0, 1.0, true), 4.95));
    // A weekly period holds seven such days.
    assert!(close(held_budget(42.5 * 7.0, 7.0, true), 41.75 * 7.0));
    // Never above the configured budget, never below zero.
    assert!(close(held_budget(0.5, 1.0, true), 0.0));
}

#[test]
fn a_lost_postings_price_is_hours_within_bounds_or_floors() {
    use super::super::settings::parse_lost_posting_hours;
    assert_eq!(parse_lost_posting_hours("floors").unwrap().0, None);
    assert_eq!(parse_lost_posting_hours("24").unwrap().0, Some(24.0));
    for bad in ["1e308", "NaN", "inf", "-1", "", "a day"] {
        assert!(parse_lost_posting_hours(bad).is_err(), "{bad}");
    }
    let s = PlannerSettings {
        lost_posting_hours: Some(1e308),
        ..PlannerSettings::default()
    };
    assert!(s.validate().is_err());
}
