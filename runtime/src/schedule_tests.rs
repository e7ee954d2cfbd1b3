//! Tests of [`super`]: plan times, transitions between plans, politeness; the day's
//! allowance and its end-of-day sweep in [`allowance`].

use super::*;

/// The planned times of the fetches that start at `t`.
fn planned(s: &mut Schedule, t: i64) -> Vec<i64> {
    s.pop_due(t).into_iter().map(|d| d.planned_ms).collect()
}

fn feed(id: &str, host: &str, offsets: &[i64], period: i64) -> FeedTimes {
    FeedTimes {
        feed_id: id.into(),
        host: host.into(),
        offsets_ms: offsets.to_vec(),
        period_ms: period,
        origin_ms: 0,
        timed: false,
    }
}

#[test]
fn an_expedited_feed_is_fetched_once_now_then_on_its_times() {
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![feed("a", "h", &[500], 1000)], 0)
        .unwrap();
    s.expedite("a", 10);
    s.expedite("nope", 10);
    // Re-assigning the feed before the expedited fetch keeps it.
    s.apply_delta(2, vec![feed("a", "h", &[500], 1000)], &[], 5)
        .unwrap();
    let due = |s: &mut Schedule, t| -> Vec<i64> {
        s.pop_due(t).into_iter().map(|d| d.planned_ms).collect()
    };
    assert_eq!(
        due(&mut s, 10),
        vec![10],
        "still expedited after the re-assignment, at its time"
    );
    // The plan's 500 is within half a gap (1000) of the first sight, which was paced
    // besides the plan: it moves to 510, half a gap after it, rather than being lost.
    assert_eq!(due(&mut s, 509), Vec::<i64>::new());
    assert_eq!(
        due(&mut s, 2600),
        vec![510, 1500, 2500],
        "one chain, no duplicate"
    );
    // A first fetch paced to a later time: the plan's times before it wait for it, and
    // a re-assignment meanwhile does not bring it forward.
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![feed("b", "h", &[500], 1000)], 0)
        .unwrap();
    s.expedite("b", 2200);
    s.apply_delta(2, vec![feed("b", "h", &[500], 1000)], &[], 100)
        .unwrap();
    assert_eq!(due(&mut s, 2199), Vec::<i64>::new());
    assert_eq!(due(&mut s, 2200), vec![2200]);
    assert_eq!(due(&mut s, 2600), Vec::<i64>::new(), "2500 moved to 2700");
    // A re-assignment after the first sight moves the new plan's time too: 2800 is
    // 600 after it, within half the new gap (2000), so it goes to 3200.
    s.apply_delta(3, vec![feed("b", "h", &[800], 2000)], &[], 2650)
        .unwrap();
    assert_eq!(due(&mut s, 3199), Vec::<i64>::new());
    assert_eq!(due(&mut s, 3200), vec![3200]);
    // Once the feed has had a fetch besides its first sight, the half-gap rule skips:
    // 3300 is 100 after the last fetch, so the next is 4300.
    s.apply_delta(4, vec![feed("b", "h", &[300], 1000)], &[], 3260)
        .unwrap();
    assert_eq!(due(&mut s, 4299), Vec::<i64>::new());
    assert_eq!(due(&mut s, 4300), vec![4300]);
}

#[test]
fn a_replan_that_moves_the_slot_behind_now_catches_up_instead_of_losing_it() {
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![feed("a", "h", &[100, 600], 1000)], 0)
        .unwrap();
    assert_eq!(s.pop_due(100).len(), 1);
    // At 550 the new plan moves the 600 slot to 500 (behind now): without a catch-up
    // the next fetch would be at 1000, 900 after the last.
    s.apply_delta(2, vec![feed("a", "h", &[0, 500], 1000)], &[], 550)
        .unwrap();
    // Due again at 600 (last fetch 100 + the new gap 500): fetched then, off the plan.
    assert_eq!(planned(&mut s, 599), Vec::<i64>::new());
    assert_eq!(planned(&mut s, 600), vec![600]);
    // The plan's 1000 slot is 400 after the catch-up, more than half the gap: kept.
    assert_eq!(planned(&mut s, 1000), vec![1000]);
    assert_eq!(planned(&mut s, 1500), vec![1500]);
    // At 2950 the plan becomes [300, 800]: next slot 3300, gap 500, and the last
    // fetch (1500) is more than a gap before it: caught up within the feed's phase of the
    // plan's arrival (under a thirty-second of the gap).
    s.apply_delta(3, vec![feed("a", "h", &[300, 800], 1000)], &[], 2950)
        .unwrap();
    let at = catch_up_at("a", 500, 2950);
    assert!((2950..2950 + 500 / 32).contains(&at), "{at}");
    assert_eq!(planned(&mut s, at - 1), Vec::<i64>::new());
    assert_eq!(planned(&mut s, at), vec![at]);
    // The 3300 slot is 350 after the catch-up, over half the gap: kept.
    assert_eq!(planned(&mut s, 3300), vec![3300]);
    // At 3400 the plan becomes [420, 900]: the 3420 slot is 120 after the last fetch,
    // within half its gap (520): skipped; the 3900 one follows.
    s.apply_delta(4, vec![feed("a", "h", &[420, 900], 1000)], &[], 3400)
        .unwrap();
    assert_eq!(planned(&mut s, 3899), Vec::<i64>::new());
    assert_eq!(planned(&mut s, 3900), vec![3900]);
}

#[test]
fn feeds_a_replan_finds_overdue_start_spread_over_minutes_not_at_its_instant() {
    let hour = DAY_MS / 24;
    let min = 60_000;
    // 300 daily feeds, each on its own host and last fetched 30 hours before a replan at
    // midnight whose plan puts them at 20:00: all are a whole gap overdue when it lands.
    let ids: Vec<String> = (0..300).map(|i| format!("feed-{i}")).collect();
    let plans = || -> Vec<FeedTimes> {
        ids.iter()
            .map(|id| feed(id, id, &[20 * hour], DAY_MS))
            .collect()
    };
    let run = |again_at: Option<i64>| -> HashMap<String, i64> {
        let mut s = Schedule::new(0);
        for id in &ids {
            s.note_last_fetch(id, DAY_MS - 30 * hour, false);
        }
        s.apply_snapshot(1, plans(), DAY_MS).unwrap();
        let mut at = HashMap::new();
        for t in (DAY_MS..DAY_MS + hour).step_by(1000) {
            // The same plan sent again part-way (a replan that changed nothing for them).
            if again_at == Some(t) {
                s.apply_delta(2, plans(), &[], t).unwrap();
            }
            for d in s.pop_due(t) {
                assert!(at.insert(d.feed_id, t).is_none(), "fetched once");
            }
        }
        at
    };
    let at = run(None);
    assert_eq!(
        at.len(),
        300,
        "every overdue feed caught up within the hour"
    );
    // Within ten minutes of the replan (a thirty-second of a day is 45), and spread:
    // 300 over 600 one-second steps, no second with more than a handful.
    assert!(at
        .values()
        .all(|&t| (DAY_MS..DAY_MS + 10 * min).contains(&t)));
    let mut per_second: HashMap<i64, usize> = HashMap::new();
    for &t in at.values() {
        *per_second.entry(t).or_default() += 1;
    }
    let busiest = per_second.values().max().copied().unwrap_or(0);
    assert!(busiest <= 6, "busiest second {busiest}");
    assert!(
        per_second.len() >= 200,
        "{} distinct seconds",
        per_second.len()
    );
    // A replan five minutes in moves none of the catch-ups still to come later.
    let again = run(Some(DAY_MS + 5 * min));
    for (id, &t) in &at {
        assert!(again[id] <= t, "{id}: {} after {t}", again[id]);
    }
    // A busy feed's window is a thirty-second of its gap: every quarter hour, under 29 s.
    for id in &ids {
        let t = catch_up_at(id, 15 * min, DAY_MS);
        assert!((DAY_MS..DAY_MS + 15 * min / 32).contains(&t));
    }
}

#[test]
fn extras_wait_for_minutes_with_room_under_a_share_of_the_minute_cap() {
    use crate::allowance::Allowance;
    let hour = DAY_MS / 24;
    let min = 60_000;
    // 300 daily feeds a replan at midnight finds a whole gap overdue (catch-ups, besides
    // the plan), and 10 whose plan puts a fetch in the fourth minute, a second apart.
    let overdue: Vec<String> = (0..300).map(|i| format!("late-{i}")).collect();
    let planned_ids: Vec<String> = (0..10).map(|i| format!("plan-{i}")).collect();
    let run = |share: Option<u64>| -> (HashMap<i64, (usize, usize)>, HashMap<String, i64>) {
        let mut s = Schedule::new(0);
        let mut feeds: Vec<FeedTimes> = overdue
            .iter()
            .map(|id| feed(id, id, &[20 * hour], DAY_MS))
            .collect();
        for (i, id) in planned_ids.iter().enumerate() {
            feeds.push(feed(id, id, &[3 * min + i as i64 * 1000], DAY_MS));
        }
        for id in &overdue {
            s.note_last_fetch(id, DAY_MS - 30 * hour, false);
        }
        s.set_allowance(
            Some(Allowance {
                day: 1,
                fetches: 10_000,
                later_days: 10_000,
                counted: 0,
                per_minute: share,
            }),
            DAY_MS,
        );
        s.apply_snapshot(1, feeds, DAY_MS).unwrap();
        // Per minute: (plan fetches, extras); when each feed started.
        let mut minutes: HashMap<i64, (usize, usize)> = HashMap::new();
        let mut at = HashMap::new();
        for t in (DAY_MS..DAY_MS + 2 * hour).step_by(1000) {
            for d in s.pop_due(t) {
                let m = minutes.entry((t - DAY_MS) / min).or_default();
                if d.feed_id.starts_with("plan-") {
                    assert_eq!(d.planned_ms, t, "a plan fetch starts at its time");
                    m.0 += 1;
                } else {
                    m.1 += 1;
                }
                assert!(at.insert(d.feed_id, t).is_none(), "fetched once");
            }
        }
        (minutes, at)
    };
    let (minutes, at) = run(Some(8));
    assert_eq!(at.len(), 310, "every feed fetched within two hours");
    for (m, &(plan, extra)) in &minutes {
        if *m == 3 {
            // The plan's ten go, above the share: the plan was levelled by the coordinator.
            assert_eq!((plan, extra), (10, 0), "minute 3");
        } else {
            assert!(plan + extra <= 8, "minute {m}: {plan} + {extra}");
        }
    }
    // 300 catch-ups at eight a minute, minute 3 skipped: done within 40 minutes.
    assert!(at.values().all(|&t| t < DAY_MS + 40 * min));
    // Without the share the catch-ups pile into the replan's first minutes.
    let (free, at) = run(None);
    assert_eq!(at.len(), 310);
    let busiest = free.values().map(|(p, e)| p + e).max().unwrap_or(0);
    assert!(busiest > 20, "busiest minute without a share: {busiest}");
}

#[test]
fn an_extra_that_would_wait_past_its_feeds_plan_time_becomes_that_time() {
    use crate::allowance::Allowance;
    let min = 60_000;
    // A share of one a minute, which a feed planned every minute fills; a feed fetched every
    // ten minutes (at :05) is a whole gap overdue when its plan lands at 0. Its catch-up
    // waits minute after minute and, when waiting longer would pass its plan's time at 5:00,
    // is that plan fetch instead: one fetch, on the plan's time, none lost or doubled.
    let mut s = Schedule::new(0);
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 100_000,
            later_days: 100_000,
            counted: 0,
            per_minute: Some(1),
        }),
        0,
    );
    s.note_last_fetch("x", -25 * min, false);
    let feeds = vec![
        feed("busy", "hb", &[0], min),
        feed("x", "hx", &[5 * min], 10 * min),
    ];
    s.apply_snapshot(1, feeds, 0).unwrap();
    let mut x = Vec::new();
    let mut busy = 0;
    for t in (0..12 * min).step_by(1000) {
        for d in s.pop_due(t) {
            if d.feed_id == "x" {
                x.push((t, d.besides_plan));
            } else {
                busy += 1;
                assert!(!d.besides_plan);
            }
        }
    }
    assert_eq!(busy, 12, "the plan's fetches all start");
    assert_eq!(x, vec![(5 * min, false)]);
    assert_eq!(s.minutes().deferred_total(), 1, "one fetch, counted once");
}

#[test]
fn a_timer_feed_waits_for_its_time_rather_than_catch_up_just_before_it() {
    // Fetched at 100; at 450 a replan moves the earlier time to 150 and the next to 610
    // (its gap 460): a catch-up is due at 560, 50 before the plan's time. An ordinary
    // feed is caught up at 560 and its 610 is then skipped (within half a gap); a timer
    // feed's 610 sits just after its window, so it waits for it (50 is within half the
    // gap), and a catch-up further ahead of the time still goes.
    for timed in [false, true] {
        let mut s = Schedule::new(0);
        let a = |offsets: &[i64]| feed("a", "h", offsets, 1000).with_timed(timed);
        s.apply_snapshot(1, vec![a(&[100, 600])], 0).unwrap();
        assert_eq!(s.pop_due(100).len(), 1);
        s.apply_delta(2, vec![a(&[150, 610])], &[], 450).unwrap();
        if timed {
            assert_eq!(planned(&mut s, 609), Vec::<i64>::new());
            assert_eq!(planned(&mut s, 610), vec![610]);
        } else {
            assert_eq!(planned(&mut s, 560), vec![560]);
            assert_eq!(planned(&mut s, 1149), Vec::<i64>::new());
            assert_eq!(planned(&mut s, 1150), vec![1150]);
        }
        // A catch-up 250 ahead of the time (more than half the gap, 350) goes for both.
        let mut s = Schedule::new(0);
        s.apply_snapshot(1, vec![a(&[100, 600])], 0).unwrap();
        assert_eq!(s.pop_due(100).len(), 1);
        s.apply_delta(2, vec![a(&[350, 700])], &[], 420).unwrap();
        assert_eq!(planned(&mut s, 449), Vec::<i64>::new(), "timed {timed}");
        assert_eq!(planned(&mut s, 450), vec![450], "timed {timed}");
    }
}

#[test]
fn a_timer_feed_found_overdue_waits_for_its_time_when_catching_up_would_skip_it() {
    // Fetched at 100; a replan at 650 plans 300 and 800 (gap 500). The feed is a whole gap
    // overdue (since 600), so an ordinary feed is caught up now, and its 800, within half a
    // gap of that, is skipped. A timer feed's 800 sits just after its window: counted from
    // when the catch-up would start (about 650, not 600) it is within half a gap, so the
    // feed waits for it rather than be fetched before the window.
    for timed in [false, true] {
        let mut s = Schedule::new(0);
        let a = |offsets: &[i64]| feed("a", "h", offsets, 1000).with_timed(timed);
        s.apply_snapshot(1, vec![a(&[100, 600])], 0).unwrap();
        assert_eq!(s.pop_due(100).len(), 1);
        s.apply_delta(2, vec![a(&[300, 800])], &[], 650).unwrap();
        if timed {
            assert_eq!(planned(&mut s, 799), Vec::<i64>::new());
            assert_eq!(planned(&mut s, 800), vec![800]);
        } else {
            let at = catch_up_at("a", 500, 650);
            assert!((650..800).contains(&at));
            assert_eq!(planned(&mut s, at), vec![at]);
            assert_eq!(planned(&mut s, 1299), Vec::<i64>::new());
            assert_eq!(planned(&mut s, 1300), vec![1300]);
        }
    }
}

#[test]
fn a_feed_taken_over_is_spaced_from_its_last_fetch_by_another_worker() {
    let due = |s: &mut Schedule, t| -> Vec<i64> {
        s.pop_due(t).into_iter().map(|d| d.planned_ms).collect()
    };
    // Plans that keep moving the feed's one time a day past now, as replans did while a
    // quiet feed's model learned. A new owner that knows no last fetch follows them and
    // never fetches; told of the previous owner's fetch at 100, the update at 1090 finds
    // the feed due a whole gap (1000) after it, at 1100, and the next fetch is a gap after
    // that catch-up (2100, before the last plan's 2140). The schedule is asked for what is
    // due every millisecond, as a worker's loop does.
    let plans = [
        (1000, 900),
        (1050, 980),
        (1090, 1060),
        (1120, 1100),
        (1150, 1140),
    ];
    for told in [false, true] {
        let mut s = Schedule::new(0);
        let mut got = Vec::new();
        for now in 1000..1200 {
            if let Some(v) = plans.iter().position(|&(at, _)| at == now) {
                if told {
                    s.note_last_fetch("a", 100, false);
                }
                let times = feed("a", "h", &[plans[v].1], 1000);
                s.apply_delta(v as u64 + 1, vec![times], &[], now).unwrap();
            }
            got.extend(due(&mut s, now));
        }
        if told {
            assert_eq!(got, vec![1100], "caught up a gap after the other fetch");
            assert_eq!(due(&mut s, 2099), Vec::<i64>::new());
            assert_eq!(due(&mut s, 2100), vec![2100]);
        } else {
            assert_eq!(got, Vec::<i64>::new(), "each plan's time moved past now");
        }
    }

    // A plan time within half a gap of the other worker's fetch is that fetch's slot:
    // skipped, unless that fetch was the first sight (then it moves half a gap on).
    for (first_sight, want) in [(false, 2400), (true, 1600)] {
        let mut s = Schedule::new(0);
        s.note_last_fetch("b", 1100, first_sight);
        s.apply_snapshot(1, vec![feed("b", "h", &[400], 1000)], 1150)
            .unwrap();
        assert_eq!(due(&mut s, want - 1), Vec::<i64>::new());
        assert_eq!(due(&mut s, want), vec![want], "first sight {first_sight}");
    }

    // The worker's own later fetch stands against an older record.
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![feed("c", "h", &[100, 600], 1000)], 0)
        .unwrap();
    assert_eq!(due(&mut s, 100), vec![100]);
    s.note_last_fetch("c", 50, false);
    s.apply_delta(2, vec![feed("c", "h", &[100, 600], 1000)], &[], 150)
        .unwrap();
    assert_eq!(
        due(&mut s, 600),
        vec![600],
        "spaced from its own fetch at 100"
    );
}

#[test]
fn a_replan_does_not_refetch_a_feed_it_just_fetched() {
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![feed("a", "h", &[100, 600], 1000)], 0)
        .unwrap();
    assert_eq!(s.pop_due(100).len(), 1);
    // The new plan moves the slot to 150, 50 after the fetch at 100: skipped.
    s.apply_delta(2, vec![feed("a", "h", &[150, 650], 1000)], &[], 120)
        .unwrap();
    assert_eq!(planned(&mut s, 640), Vec::<i64>::new());
    // A slot far enough from the last fetch is kept.
    s.apply_delta(3, vec![feed("a", "h", &[400, 900], 1000)], &[], 130)
        .unwrap();
    assert_eq!(planned(&mut s, 640), vec![400]);
}

#[test]
fn next_after_walks_offsets_and_periods() {
    let f = feed("a", "h", &[300, 100], 1000);
    assert_eq!(f.next_after(-1), Some(100));
    assert_eq!(f.next_after(100), Some(300));
    assert_eq!(f.next_after(300), Some(1100));
    assert_eq!(f.next_after(2950), Some(3100));
    assert_eq!(feed("e", "h", &[], 1000).next_after(0), None);
    assert_eq!(f.prev_before(300), Some(100));
    assert_eq!(f.prev_before(100), Some(-700));
    assert_eq!(f.prev_before(1250), Some(1100));
    assert_eq!(feed("e", "h", &[], 1000).prev_before(0), None);
}

#[test]
fn fetches_come_due_in_order_and_repeat() {
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![
            feed("a", "h1", &[100, 600], 1000),
            feed("b", "h2", &[300], 1000),
        ],
        0,
    )
    .unwrap();
    let mut seen = Vec::new();
    for now in (0..=2000).step_by(50) {
        seen.extend(
            s.pop_due(now)
                .into_iter()
                .map(|d| (d.feed_id, d.planned_ms)),
        );
    }
    let want: Vec<(String, i64)> = [
        ("a", 100),
        ("b", 300),
        ("a", 600),
        ("a", 1100),
        ("b", 1300),
        ("a", 1600),
    ]
    .iter()
    .map(|(f, t)| (f.to_string(), *t))
    .collect();
    assert_eq!(seen, want);
}

#[test]
fn politeness_spaces_fetches_of_one_host() {
    let mut s = Schedule::new(500);
    s.apply_snapshot(
        1,
        vec![
            feed("a", "same", &[100], 10_000),
            feed("b", "same", &[100], 10_000),
            feed("c", "other", &[100], 10_000),
        ],
        0,
    )
    .unwrap();
    let first = s.pop_due(100);
    assert_eq!(first.len(), 2, "one per host: {first:?}");
    assert!(s.pop_due(599).is_empty());
    let later = s.pop_due(600);
    assert_eq!(later.len(), 1);
    assert_eq!(
        later[0].planned_ms, 100,
        "the deferred fetch keeps its planned time (lateness 500 ms)"
    );
}

#[test]
fn versions_revocations_and_bad_input() {
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        5,
        vec![feed("a", "h", &[100], 1000), feed("b", "h2", &[100], 1000)],
        0,
    )
    .unwrap();
    assert_eq!(
        s.apply_snapshot(5, vec![], 0),
        Err(UpdateError::Stale { got: 5, applied: 5 })
    );
    assert_eq!(
        s.apply_delta(4, vec![], &[], 0),
        Err(UpdateError::Stale { got: 4, applied: 5 })
    );
    assert_eq!(
        s.apply_delta(6, vec![feed("z", "h", &[1], 0)], &[], 0),
        Err(UpdateError::BadPeriod("z".into()))
    );
    assert_eq!(s.len(), 2, "rejected updates change nothing");
    s.apply_delta(6, vec![feed("a", "h", &[700], 1000)], &["b".to_string()], 0)
        .unwrap();
    let due: Vec<String> = (0..1000)
        .step_by(100)
        .flat_map(|t| s.pop_due(t))
        .map(|d| d.feed_id)
        .collect();
    assert_eq!(due, vec!["a"], "b revoked; a moved to 700");
    assert_eq!(s.version(), 6);
}

#[test]
fn skip_hours_and_days_are_read_in_utc() {
    // 2026-05-04 is a Monday.
    let monday = 1_777_852_800_000i64;
    assert!(!skipped(0, 0, monday));
    assert!(skipped(1 << 0, 0, monday + 59 * 60_000));
    assert!(!skipped(1 << 0, 0, monday + 3_600_000));
    assert!(skipped(1 << 23, 0, monday - 1));
    assert!(skipped(0, 1 << 0, monday + 5 * 3_600_000));
    assert!(!skipped(0, 1 << 0, monday + 86_400_000));
    assert!(skipped(0, 1 << 6, monday - 1), "the Sunday before");
}

#[path = "schedule_allowance_tests.rs"]
mod allowance;
