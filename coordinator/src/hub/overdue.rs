//! Feeds left unfetched longer than any plan allows them: every plan fetches each feed at
//! least `--min-fetches-per-day` (a feed held back by its own failures or its host aside),
//! and the workers' day gates and catch-ups may move a fetch by about a day, no more. A feed
//! whose last fetch is older than that has fallen out of the schedule somewhere (an
//! allowance that never had room for it, a replan that kept moving it later, a worker that
//! lost it) and would stay out silently: no posting it makes is seen, so no model notices.
//! Each round counts such feeds for `kairos_plan_feeds_overdue` and the log.

use crate::control::feedstate::FeedState;
use crate::control::FeedSpec;
use crate::time::DAY_MS;
use std::collections::HashMap;
use std::sync::Arc;

/// How far past its longest allowed gap a feed's fetch may fall before it counts as
/// overdue. A worker's day gate holds a fetch with no room left in its UTC day until the
/// next one, and a replan's catch-up starts within minutes: on the traces measured (at half
/// a fetch a day, `real-commits` and the synthetic populations, docs/EXPERIMENTS.md) the longest
/// gap of a feed planned weekly was 7.49 days.
pub const GRACE_MS: i64 = DAY_MS;

/// The feeds a round found overdue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overdue {
    /// Feeds unfetched past their longest allowed gap and [`GRACE_MS`].
    pub feeds: usize,
    /// The longest time since a fetch among them (ms) and its feed.
    pub longest: Option<(i64, String)>,
}

/// The longest gap `spec`'s plan leaves between two fetches (ms): between consecutive
/// offsets, and from the last round the period to the first. `None` for a plan without
/// fetches.
pub fn longest_planned_gap_ms(spec: &FeedSpec) -> Option<i64> {
    let period = spec.period_seconds;
    if spec.offsets_seconds.is_empty() || !(period > 0.0 && period.is_finite()) {
        return None;
    }
    let mut offsets = spec.offsets_seconds.clone();
    offsets.sort_by(f64::total_cmp);
    let wrap = offsets[0] + period - offsets[offsets.len() - 1];
    let gap = offsets.windows(2).map(|w| w[1] - w[0]).fold(wrap, f64::max);
    Some((gap * 1000.0).round() as i64)
}

/// Counts the planned feeds whose last fetch (answered or failed) is older than the longest
/// gap any plan allows them, `max(their plan's longest gap, 1 / floor_per_day)` plus a day
/// per publisher-skipped weekday and [`GRACE_MS`]. Left out: feeds never fetched (their
/// first sight is paced apart), feeds backing off after failures (shown as failing, with
/// their own longer gaps), and feeds held until a later time (a throttling or unreachable
/// host, a Retry-After).
pub fn overdue<'a>(
    specs: impl IntoIterator<Item = &'a FeedSpec>,
    states: &HashMap<String, Arc<FeedState>>,
    floor_per_day: f64,
    now_ms: i64,
) -> Overdue {
    let floor_gap_ms = if floor_per_day > 0.0 && floor_per_day.is_finite() {
        (DAY_MS as f64 / floor_per_day).round() as i64
    } else {
        i64::MAX / 4
    };
    let mut out = Overdue::default();
    for spec in specs {
        if spec.not_before_unix_ms > now_ms {
            continue;
        }
        let Some(st) = states.get(&spec.id) else {
            continue;
        };
        if st.health.consecutive_failures > 0 {
            continue;
        }
        let last = match (st.last_answered_ms, st.health.last_failure_ms) {
            (Some(a), Some(f)) => a.max(f),
            (Some(a), None) => a,
            (None, Some(f)) => f,
            (None, None) => continue,
        };
        let planned = longest_planned_gap_ms(spec).unwrap_or(0);
        let skipped_days = (spec.skip_days & 0x7f).count_ones() as i64;
        let allowed = planned
            .max(floor_gap_ms)
            .saturating_add(skipped_days * DAY_MS + GRACE_MS);
        // A reported time is the worker's word: far off either way, it must not overflow.
        let since = now_ms.saturating_sub(last);
        if since > allowed {
            out.feeds += 1;
            if out.longest.as_ref().is_none_or(|(l, _)| since > *l) {
                out.longest = Some((since, spec.id.clone()));
            }
        }
    }
    out
}

/// Says when feeds fall out of the schedule, once as their count rises, and when the last
/// of them is back: the gauge carries the count between.
pub(super) fn log_change(before: usize, f: &super::PlanFigures) {
    if f.overdue_feeds > before {
        tracing::warn!(
            feeds_overdue = f.overdue_feeds,
            was = before,
            longest_feed = %f.overdue_longest_feed,
            longest_days = f.overdue_longest_seconds / 86_400.0,
            "feeds left unfetched past the longest gap their plan or the floor allows \
             (`kairosctl feeds plan FEED` shows its plan; its worker's allowance or schedule lost it)"
        );
    } else if f.overdue_feeds == 0 && before > 0 {
        tracing::info!(was = before, "no feed is overdue any more");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_772_409_600_000;

    fn spec(id: &str, offsets: &[f64], period_days: f64) -> FeedSpec {
        FeedSpec {
            id: id.into(),
            url: format!("https://{id}.example/rss"),
            host: format!("{id}.example"),
            offsets_seconds: offsets.to_vec(),
            period_seconds: period_days * 86_400.0,
            ..FeedSpec::default()
        }
    }

    fn fetched(days_ago: f64) -> Arc<FeedState> {
        Arc::new(FeedState {
            last_answered_ms: Some(NOW - (days_ago * DAY_MS as f64) as i64),
            fetches: 1,
            ..FeedState::default()
        })
    }

    #[test]
    fn the_longest_gap_wraps_around_the_period() {
        // Fetches at 1 h and 5 h of a day: 4 h apart, then 20 h to the next day's first.
        let s = spec("a", &[18_000.0, 3_600.0], 1.0);
        assert_eq!(longest_planned_gap_ms(&s), Some(20 * 3_600_000));
        assert_eq!(
            longest_planned_gap_ms(&spec("b", &[0.0], 7.0)),
            Some(7 * DAY_MS)
        );
        assert_eq!(longest_planned_gap_ms(&spec("c", &[], 1.0)), None);
    }

    #[test]
    fn a_feed_counts_once_a_day_past_the_floor_or_its_own_longer_plan() {
        let floor = 1.0 / 7.0;
        let specs = [
            spec("daily", &[0.0], 1.0),
            spec("weekly", &[0.0], 7.0),
            // Planned once in 14 days (a bound of its own): owed that, not the floor.
            spec("fortnightly", &[0.0], 14.0),
        ];
        let at = |daily: f64, weekly: f64, fortnightly: f64| {
            let states: HashMap<String, Arc<FeedState>> = [
                ("daily".to_string(), fetched(daily)),
                ("weekly".to_string(), fetched(weekly)),
                ("fortnightly".to_string(), fetched(fortnightly)),
            ]
            .into();
            overdue(&specs, &states, floor, NOW)
        };
        // A daily feed three days behind is late, not past what any plan allows it.
        assert_eq!(at(3.0, 7.9, 14.9).feeds, 0);
        let o = at(8.5, 8.2, 15.1);
        assert_eq!(o.feeds, 3);
        assert_eq!(o.longest.unwrap().1, "fortnightly");
        let o = at(8.5, 7.5, 14.5);
        assert_eq!(o.feeds, 1);
        let (since, id) = o.longest.unwrap();
        assert_eq!(id, "daily");
        assert_eq!(since, (8.5 * DAY_MS as f64) as i64);
    }

    #[test]
    fn extreme_times_periods_and_floors_give_a_count_not_a_panic() {
        let mut odd = spec("odd", &[f64::NAN], f64::NAN);
        odd.period_seconds = f64::INFINITY;
        let specs = [odd, spec("huge", &[0.0, 1e308], 1.0)];
        let states: HashMap<String, Arc<FeedState>> = [
            (
                "odd".to_string(),
                Arc::new(FeedState {
                    last_answered_ms: Some(i64::MIN),
                    ..FeedState::default()
                }),
            ),
            (
                "huge".to_string(),
                Arc::new(FeedState {
                    last_answered_ms: Some(i64::MAX),
                    ..FeedState::default()
                }),
            ),
        ]
        .into();
        for floor in [f64::NAN, 0.0, -1.0, f64::INFINITY, 1e308, 1.0 / 7.0] {
            let o = overdue(&specs, &states, floor, NOW);
            // Fetched at the beginning of time: overdue under any floor; in the future: not.
            assert_eq!(o.feeds, 1, "{floor}");
            assert_eq!(o.longest.unwrap().1, "odd");
        }
    }

    #[test]
    fn held_failing_unseen_and_skipped_day_feeds_are_left_out_or_given_their_days() {
        let floor = 1.0 / 7.0;
        let mut held = spec("held", &[0.0], 1.0);
        held.not_before_unix_ms = NOW + 3_600_000;
        let mut skipping = spec("skipping", &[0.0], 1.0);
        skipping.skip_days = 0b110_0000; // Saturday and Sunday.
        let specs = [
            held,
            spec("failing", &[0.0], 1.0),
            spec("new", &[0.0], 1.0),
            skipping,
        ];
        let mut failing = (*fetched(20.0)).clone();
        failing.health.consecutive_failures = 3;
        failing.health.last_failure_ms = Some(NOW - 2 * DAY_MS);
        let mut states: HashMap<String, Arc<FeedState>> = [
            ("held".to_string(), fetched(20.0)),
            ("failing".to_string(), Arc::new(failing)),
            ("skipping".to_string(), fetched(9.5)),
        ]
        .into();
        assert_eq!(overdue(&specs, &states, floor, NOW), Overdue::default());
        states.insert("skipping".into(), fetched(10.5));
        assert_eq!(overdue(&specs, &states, floor, NOW).feeds, 1);
        // A failure is a fetch: one a day ago keeps a feed that answered long ago in time.
        let mut recovered = (*fetched(20.0)).clone();
        recovered.health.last_failure_ms = Some(NOW - DAY_MS);
        states.insert("skipping".into(), Arc::new(recovered));
        assert_eq!(overdue(&specs, &states, floor, NOW).feeds, 0);
    }

    /// The hub's rounds count them: a feed answered nine days ago under the default floor
    /// (a fetch a week) is overdue, one answered two days ago is not, and feeds never
    /// fetched are left to their first sight.
    #[test]
    fn a_round_counts_the_feeds_unfetched_past_the_floor() {
        use crate::store::memory::MemoryBackend;
        use kairos_runtime::clock::SimClock;
        super::super::test_runtime().block_on(async {
            let hub =
                super::super::open_for_tests(Arc::new(MemoryBackend::new()), SimClock::manual(NOW))
                    .await;
            for f in ["stale", "fresh", "unseen"] {
                hub.add_feed(Some(f), &format!("https://{f}.example/rss"), 1.0)
                    .await
                    .unwrap();
            }
            hub.replan().await.unwrap();
            let figures = hub.totals().await.last_plan.expect("a plan");
            assert_eq!(figures.overdue_feeds, 0);
            hub.with_state(|s| {
                s.feeds.insert("stale".into(), fetched(9.0));
                s.feeds.insert("fresh".into(), fetched(2.0));
            })
            .await;
            hub.replan().await.unwrap();
            let figures = hub.totals().await.last_plan.expect("a plan");
            assert_eq!(figures.overdue_feeds, 1);
            assert_eq!(figures.overdue_longest_feed, "stale");
            assert_eq!(figures.overdue_longest_seconds, 9.0 * 86_400.0);
        });
    }
}
