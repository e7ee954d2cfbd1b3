//! Tests of [`super`]: tallies, clumps and the population's pool.

use super::*;

const HOUR: i64 = DAY_MS / BINS as i64;

/// P(X > c) for X ~ Poisson(mean), summed term by term.
fn tail_above(mean: f64, c: u32) -> f64 {
    let mut p = (-mean).exp();
    let mut cdf = p;
    for k in 1..=c {
        p *= mean / f64::from(k);
        cdf += p;
    }
    1.0 - cdf
}

/// A feed watched 28 days from 0 with one posting a day at 10:00 on `days`.
fn posting_on(days: impl Iterator<Item = i64>) -> FeedState {
    let mut st = FeedState {
        observed_since_ms: Some(0),
        ..FeedState::default()
    };
    st.postings_ms.extend(days.map(|d| d * DAY_MS + 10 * HOUR));
    st.last_answered_ms = Some(28 * DAY_MS);
    st
}

#[test]
fn a_feed_that_woke_up_is_learned_at_its_new_rate_and_a_steady_one_as_before() {
    let now = 28 * DAY_MS;
    let rate = |st: &FeedState| {
        let t = tally(st, 0, now, &|_| 1.0, &EVEN_DAY).expect("watched");
        (
            t.n / t.span_days,
            t.counts[10],
            t.exposure[10] * t.span_days,
        )
    };
    // Daily from day 20: about one a day, not 8 in 28 days.
    let (woke, at_ten, _) = rate(&posting_on(20..28));
    assert!(woke > 0.4 && woke < 0.8, "{woke}");
    assert_eq!(at_ten, 8.0, "the hours keep their counts");
    // Every other day all along: half a day, as without regimes.
    let (steady, _, _) = rate(&posting_on((0..28).step_by(2)));
    assert!((steady - 0.5).abs() < 0.03, "{steady}");
    // Daily until day 10, then silent: well below the 10 / 28 of all the window.
    let (stopped, _, _) = rate(&posting_on(0..10));
    assert!(stopped < 0.15, "{stopped}");
}

#[test]
fn the_poisson_bound_is_the_smallest_count_past_the_tail() {
    for mean in [0.001, 0.02, 0.1, 0.5, 1.0, 3.0, 12.0, 40.0] {
        let c = poisson_upper(mean, CLUMP_TAIL);
        assert!(tail_above(mean, c) < CLUMP_TAIL, "mean {mean}: c {c}");
        if c > 0 {
            assert!(tail_above(mean, c - 1) >= CLUMP_TAIL, "mean {mean}: c {c}");
        }
    }
    assert_eq!(poisson_upper(0.0, CLUMP_TAIL), 0);
    assert_eq!(poisson_upper(f64::NAN, CLUMP_TAIL), 0);
    // Past the exact sum, a bound above the mean by a few standard deviations.
    let big = poisson_upper(400.0, CLUMP_TAIL);
    assert!((450..=490).contains(&big), "{big}");
}

/// One posting a day at 09:10 for `days` days, and a burst of `burst` at 15:00–15:50
/// on day 5.
fn daily_with_burst(days: i64, burst: i64) -> Vec<i64> {
    let mut t: Vec<i64> = (0..days).map(|d| d * DAY_MS + 9 * HOUR + 600_000).collect();
    t.extend((0..burst).map(|i| 5 * DAY_MS + 15 * HOUR + i * 300_000));
    t.sort_unstable();
    t
}

#[test]
fn a_burst_at_an_unusual_hour_keeps_one_posting_there() {
    let t = daily_with_burst(14, 10);
    let excess = clump_excess(&t, 0, 14 * DAY_MS);
    let flagged: Vec<i64> = t
        .iter()
        .zip(&excess)
        .filter(|(_, &e)| e)
        .map(|(&t, _)| t)
        .collect();
    assert_eq!(flagged.len(), 9);
    assert!(flagged.iter().all(|&t| t.div_euclid(HOUR) == 5 * 24 + 15));
    // Watched under two days: nothing to compare the burst with.
    let short = daily_with_burst(1, 10);
    let short: Vec<i64> = short.into_iter().map(|t| t - 5 * DAY_MS).collect();
    assert!(clump_excess(&short, 0, DAY_MS + DAY_MS / 2)
        .iter()
        .all(|&e| !e));
}

#[test]
fn many_postings_at_the_same_hour_every_day_are_no_clump() {
    let t: Vec<i64> = (0..14)
        .flat_map(|d| (0..10).map(move |i| d * DAY_MS + 9 * HOUR + i * 300_000))
        .collect();
    assert!(clump_excess(&t, 0, 14 * DAY_MS).iter().all(|&e| !e));
}

#[test]
fn extreme_dates_and_floods_are_judged_without_overflow() {
    // Dates before 1970 and far ahead, and the most observations a feed keeps in one
    // hour: finite answers, the flood kept once at most by its bound.
    let mut t: Vec<i64> = (0..4096).map(|i| 3 * DAY_MS + i).collect();
    t.insert(0, -40 * 365 * DAY_MS);
    t.push(i64::MAX / 4);
    let excess = clump_excess(&t, -50 * 365 * DAY_MS, i64::MAX / 2);
    assert_eq!(excess.len(), t.len());
    assert!(excess.iter().filter(|&&e| e).count() >= 4090);
    let (from, until) = (i64::MIN / 4, i64::MAX / 4);
    assert!(clump_excess(&t, until, from).iter().all(|&e| !e));
}

#[test]
fn a_clumps_excess_keeps_the_rate_and_goes_where_clumps_land() {
    let st = FeedState {
        observed_since_ms: Some(0),
        last_answered_ms: Some(14 * DAY_MS),
        postings_ms: daily_with_burst(14, 10).into(),
        ..Default::default()
    };
    // The population's clumps land at 20:00 and 21:00 three times in four.
    let mut pool = [0.25 / 22.0; BINS];
    (pool[20], pool[21]) = (0.375, 0.375);
    let t = tally(&st, 0, 14 * DAY_MS, &|_| 1.0, &pool).expect("watched");
    assert_eq!(t.n, 24.0);
    assert!((t.counts.iter().sum::<f64>() - 24.0).abs() < 1e-9);
    // Kept: 14 at nine and one at fifteen; the nine others go where clumps land, not
    // to nine o'clock.
    let rest = 9.0 * 0.25 / 22.0;
    assert!((t.counts[9] - (14.0 + rest)).abs() < 1e-9, "{:?}", t.counts);
    assert!((t.counts[15] - (1.0 + rest)).abs() < 1e-9, "{:?}", t.counts);
    assert!((t.counts[20] - 9.0 * 0.375).abs() < 1e-9, "{:?}", t.counts);
    // Before any clump is seen, an even day.
    let even = tally(&st, 0, 14 * DAY_MS, &|_| 1.0, &EVEN_DAY).unwrap();
    assert!(
        (even.counts[3] - 9.0 / 24.0).abs() < 1e-9,
        "{:?}",
        even.counts
    );
    assert!(t.clumped);
    // The same feed without its burst posted no clump.
    let calm = FeedState {
        postings_ms: daily_with_burst(14, 1).into(),
        ..st
    };
    assert!(
        !tally(&calm, 0, 14 * DAY_MS, &|_| 1.0, &EVEN_DAY)
            .unwrap()
            .clumped
    );
}

#[test]
fn the_pool_counts_each_clump_once_at_its_hour() {
    let feed = |postings: Vec<i64>| FeedState {
        observed_since_ms: Some(0),
        last_answered_ms: Some(14 * DAY_MS),
        postings_ms: postings.into(),
        ..Default::default()
    };
    // Two feeds with a burst at 15:00 on day 5, a third flooding 500 postings into
    // 03:00 on day 8, a fourth with no clump.
    let mut flood = daily_with_burst(14, 1);
    flood.extend((0..500).map(|i| 8 * DAY_MS + 3 * HOUR + i * 7_000));
    flood.sort_unstable();
    let states = [
        feed(daily_with_burst(14, 10)),
        feed(daily_with_burst(14, 6)),
        feed(flood),
        feed(daily_with_burst(14, 1)),
    ];
    let all: Vec<&FeedState> = states.iter().collect();
    let pool = clump_hours(&all, |s| Some(*s), 0, 14 * DAY_MS, &|_| 1.0);
    assert!((pool.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    // Three clumps and 24 pseudo-clumps: 15:00 holds 1 + 2, 03:00 1 + 1 (the flood
    // counts once), every other hour its pseudo-clump.
    let total = 24.0 * CLUMP_HOURS_PRIOR + 3.0;
    assert!((pool[15] - 3.0 / total).abs() < 1e-12, "{pool:?}");
    assert!((pool[3] - 2.0 / total).abs() < 1e-12, "{pool:?}");
    assert!((pool[9] - 1.0 / total).abs() < 1e-12, "{pool:?}");
    // No clump anywhere: an even day.
    let calm = [feed(daily_with_burst(14, 1))];
    let calm: Vec<&FeedState> = calm.iter().collect();
    let pool = clump_hours(&calm, |s| Some(*s), 0, 14 * DAY_MS, &|_| 1.0);
    assert!(pool.iter().all(|&p| (p - 1.0 / 24.0).abs() < 1e-12));
}

#[test]
fn time_a_document_may_have_lost_postings_in_is_not_watched() {
    let watched = FeedState {
        observed_since_ms: Some(0),
        last_answered_ms: Some(10 * DAY_MS),
        postings_ms: (0..10).map(|d| d * DAY_MS + 21 * HOUR).collect(),
        ..Default::default()
    };
    let full = tally(&watched, 0, 10 * DAY_MS, &|_| 1.0, &EVEN_DAY).unwrap();
    assert!((full.span_days - 10.0).abs() < 1e-9);
    // Two days, 00:00 to 12:00 on each, behind overflowed documents.
    let blind = FeedState {
        blind_ms: [
            (2 * DAY_MS, 2 * DAY_MS + 12 * HOUR),
            (5 * DAY_MS, 5 * DAY_MS + 12 * HOUR),
        ]
        .into(),
        ..watched
    };
    let t = tally(&blind, 0, 10 * DAY_MS, &|_| 1.0, &EVEN_DAY).unwrap();
    // Up to the regime's level (within 1% of 1 for this steady feed), which divides
    // every hour's exposure alike.
    assert!((t.span_days / 9.0 - 1.0).abs() < 0.01, "{}", t.span_days);
    let level = 10.0 / t.exposure[15];
    assert!((level - 1.0).abs() < 0.01, "{level}");
    assert!(
        (t.exposure[3] * level - 8.0).abs() < 1e-9,
        "{:?}",
        t.exposure
    );
    assert!((t.span_days * level - 9.0).abs() < 1e-9, "{}", t.span_days);
    assert_eq!(t.n, full.n);
}

/// A population of `feeds`: feeds posting daily at their own
/// hour, some with bursts, floods, postings with no date of their own spread over hours,
/// and some never watched.
fn mixed_population(feeds: usize) -> Vec<FeedState> {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    (0..feeds)
        .map(|f| {
            if next(10) == 0 {
                return FeedState::default();
            }
            let hour = next(24) as i64;
            let mut t = Vec::new();
            for d in 0..14 {
                if next(3) > 0 {
                    t.push(d * DAY_MS + hour * HOUR + next(3_600_000) as i64);
                }
            }
            if next(4) == 0 {
                let (day, at) = (next(14) as i64, next(24) as i64);
                let n = 2 + next(if f % 97 == 0 { 400 } else { 12 }) as i64;
                t.extend((0..n).map(|i| day * DAY_MS + at * HOUR + i * 5_000));
            }
            t.sort_unstable();
            let mut st = FeedState {
                observed_since_ms: Some(next(3) as i64 * DAY_MS),
                last_answered_ms: Some(14 * DAY_MS),
                postings_ms: t.into(),
                ..Default::default()
            };
            if next(6) == 0 {
                let to = (1 + next(13) as i64) * DAY_MS + next(DAY_MS as u64) as i64;
                st.spread_ms.push_back((to - 30 * HOUR, to));
            }
            st
        })
        .collect()
}

#[test]
fn one_read_of_each_window_gives_the_pool_and_tallies_of_two_to_the_bit() {
    let states = mixed_population(CLUMP_CHUNK + 1_500);
    let refs: Vec<&FeedState> = states.iter().collect();
    let now = 14 * DAY_MS;
    let w = |t: i64| (-((now - t) as f64) / (5.0 * DAY_MS as f64)).exp();
    let pool = clump_hours(&refs, |s| Some(*s), 0, now, &w);
    let folded = |threads: usize| {
        let n = refs.len();
        let (mut counts, mut exposure) = (vec![[0.0; BINS]; n], vec![[0.0; BINS]; n]);
        let (mut span, mut size) = (vec![0.0; n], vec![1.0; n]);
        let (rates, hours) = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("a pool")
            .install(|| {
                tally_population(
                    &refs,
                    |s| Some(*s),
                    0,
                    now,
                    &w,
                    TallyOut {
                        counts: &mut counts,
                        exposure: &mut exposure,
                        span_days: &mut span,
                        clump_size: &mut size,
                    },
                )
            });
        (rates, hours, counts, exposure, span, size)
    };
    let one = folded(1);
    assert_eq!(one, folded(3), "the thread count moved a sum");
    let (rates, hours, counts, exposure, span, size) = one;
    assert_eq!(hours, pool);
    let (mut clumped, mut again) = (0, 0);
    for (f, st) in refs.iter().enumerate() {
        let Some(t) = tally(st, 0, now, &w, &pool) else {
            assert_eq!(rates[f], None, "feed {f}");
            continue;
        };
        assert_eq!(
            rates[f],
            Some((t.n / t.span_days.max(1.0), t.level)),
            "feed {f}"
        );
        assert_eq!(counts[f], t.counts, "feed {f}");
        assert_eq!(exposure[f], t.exposure, "feed {f}");
        assert_eq!((span[f], size[f]), (t.span_days, t.clump_size), "feed {f}");
        clumped += usize::from(t.clumped);
        again += usize::from(t.clumped && !st.spread_ms.is_empty());
    }
    // The population holds what the test is for: clumps, and clumps beside spread
    // postings (tallied again).
    assert!(
        clumped > 500 && again > 50,
        "{clumped} clumped, {again} with spread"
    );
    assert!(pool.iter().any(|&h| h > 1.2 / BINS as f64), "{pool:?}");
}
