//! Tests of [`super`]: plan times, transitions between plans, politeness, the day's
//! allowance and its end-of-day sweep.

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
fn a_spent_allowance_holds_fetches_to_the_next_day_once_each() {
    use crate::allowance::DAY_MS;
    let hour = DAY_MS / 24;
    // Three feeds fetched every 6 hours; the worker may start 5 fetches today and 12
    // on later days.
    let mut s = Schedule::new(0);
    let feeds = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, id)| feed(id, id, &[i as i64 * 1000], 6 * hour))
        .collect();
    s.apply_snapshot(1, feeds, 0).unwrap();
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 5,
            later_days: 12,
            counted: 0,
        }),
        0,
    );
    let mut per_day = [0usize; 3];
    let mut t = 0;
    while t < 3 * DAY_MS {
        for d in s.pop_due(t) {
            per_day[(t / DAY_MS) as usize] += 1;
            if t == DAY_MS {
                assert_eq!(
                    d.planned_ms, DAY_MS,
                    "the first held fetch stands at the day's start"
                );
            }
        }
        t += 60_000;
    }
    // Day 0: 5 of its 12 slots. Day 1: the held fetches go first (one per feed, not
    // one per missed slot), then the plan; 12 in all. Above a fetch per feed a day the
    // held fetches come besides the plan's (the end-of-day sweep finds the slack), so
    // day 1 holds some over in turn: day 0 holds its three feeds, the next days one each.
    // Held fetches start paced (every 15 minutes here, `DayGate::admit`), so the two
    // released after 00:00:01 stand in for their feeds' first slots of the day.
    assert_eq!(per_day, [5, 12, 12]);
    assert_eq!(s.gate().started_today(), 12);
    assert_eq!(s.gate().held_total(), 5);
}

#[test]
fn a_held_backlog_drains_on_days_without_slack() {
    use crate::allowance::DAY_MS;
    let hour = DAY_MS / 24;
    // Four feeds fetched once a day, at 06:00, 12:00, 18:00 and 23:00; day 0 may start
    // two fetches, later days four: the plan's exact load. The two held on day 0 stand
    // in for their feeds' fetches of day 1, so day 1 holds nothing over. Kept besides
    // them, day 1 would owe six fetches, hold its last two, and so on every day.
    let mut s = Schedule::new(0);
    let feeds = [6, 12, 18, 23]
        .iter()
        .enumerate()
        .map(|(i, h)| feed(&format!("f{i}"), &format!("h{i}"), &[h * hour], DAY_MS))
        .collect();
    s.apply_snapshot(1, feeds, 0).unwrap();
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 2,
            later_days: 4,
            counted: 0,
        }),
        0,
    );
    let mut per_day = [0usize; 4];
    let mut held_by_day = [0u64; 4];
    let mut t = 0;
    while t < 4 * DAY_MS {
        let before = s.gate().held_total();
        per_day[(t / DAY_MS) as usize] += s.pop_due(t).len();
        held_by_day[(t / DAY_MS) as usize] += s.gate().held_total() - before;
        t += 60_000;
    }
    assert_eq!(per_day, [2, 4, 4, 4]);
    assert_eq!(held_by_day, [2, 0, 0, 0], "the backlog is gone after day 1");
}

#[test]
fn a_catch_up_goes_ahead_only_while_the_day_has_room_beyond_the_feeds_due() {
    let hour = DAY_MS / 24;
    let allow = |fetches| Allowance {
        day: 0,
        fetches,
        later_days: 6,
        counted: 0,
    };
    // Two feeds fetched once a day at 01:00, four fetched once a day at 20:00.
    let daily = |id: &str, at: i64| feed(id, id, &[at * hour], DAY_MS);
    let mut plans: Vec<FeedTimes> = vec![daily("a", 1), daily("b", 1)];
    plans.extend(["c", "d", "e", "f"].iter().map(|id| daily(id, 20)));
    // At 11:00 a and b move to twice a day, 08:00 and 20:00: their last fetch (01:00) is
    // a whole gap before 20:00, so each is due a catch-up at 13:00.
    let twice = |id: &str| feed(id, id, &[8 * hour, 20 * hour], DAY_MS);
    let run = |fetches: u64| -> Vec<(String, i64)> {
        let mut s = Schedule::new(0);
        s.set_allowance(Some(allow(fetches)), 0);
        s.apply_snapshot(1, plans.clone(), 0).unwrap();
        let mut out = Vec::new();
        let mut t = 0;
        while t < DAY_MS {
            if t == 11 * hour {
                s.apply_delta(2, vec![twice("a"), twice("b")], &[], t)
                    .unwrap();
            }
            out.extend(s.pop_due(t).into_iter().map(|d| (d.feed_id, t)));
            t += 60_000;
        }
        out
    };
    let hours = |v: &[(String, i64)], id: &str| -> Vec<i64> {
        v.iter()
            .filter(|(f, _)| f == id)
            .map(|(_, t)| t / hour)
            .collect()
    };
    // 2 spent by 11:00, and four feeds due at 20:00. With 12 for the day the room
    // beyond them (6) takes both catch-ups; the plan's 20:00 follows 7 hours later. The
    // two left at 23:00 go to a and b besides their plan (c to f are due at 20:00 again,
    // a and b at 08:00: a gap and a half, against three quarters).
    let roomy = run(12);
    assert_eq!(hours(&roomy, "a"), vec![1, 13, 20, 23]);
    assert_eq!(hours(&roomy, "b"), vec![1, 13, 20, 23]);
    assert_eq!(roomy.len(), 12);
    // With 7 the room beyond them is one: a (first in the update) is caught up, b waits
    // for the plan's 20:00 (where the allowance then runs out).
    let one = run(7);
    assert_eq!(hours(&one, "a")[..2], [1, 13]);
    assert!(!hours(&one, "b").contains(&13));
    assert_eq!(one.len(), 7);
    // With 6 there is none: neither is, and the day spends its 6 on the plan's times.
    let none = run(6);
    assert!(none.iter().all(|(_, t)| t / hour == 1 || t / hour == 20));
    assert_eq!(none.len(), 6);
}

#[test]
fn a_replan_never_moves_an_overdue_feeds_queued_fetch_later() {
    let hour = DAY_MS / 24;
    // `a` and `b` are fetched daily at 20:00 and spend the day's allowance; `q`, last
    // fetched four days before day 0, is queued by its old plan (every 7 days) for
    // `old_at`. At 10:00 a replan spaces `q` 3 days apart, its next time at 2d 20:00: by
    // that gap `q` is overdue, a catch-up the day has no spare room for.
    let run = |old_at: i64, fetches: u64| -> Vec<i64> {
        let mut s = Schedule::new(0);
        s.set_allowance(
            Some(Allowance {
                day: 0,
                fetches,
                later_days: 2,
                counted: 0,
            }),
            0,
        );
        s.note_last_fetch("q", -4 * DAY_MS, false);
        let daily = |id: &str| feed(id, id, &[20 * hour], DAY_MS);
        let plans = vec![
            daily("a"),
            daily("b"),
            feed("q", "q", &[old_at], 7 * DAY_MS),
        ];
        s.apply_snapshot(1, plans, 0).unwrap();
        let mut out = Vec::new();
        let mut t = 0;
        while t < 3 * DAY_MS {
            if t == 10 * hour {
                let replan = feed("q", "q", &[2 * DAY_MS + 20 * hour], 3 * DAY_MS);
                s.apply_delta(2, vec![replan], &[], t).unwrap();
            }
            for d in s.pop_due(t) {
                if d.feed_id == "q" {
                    out.push(t);
                }
            }
            t += 60_000;
        }
        out
    };
    // Queued for 2d 02:00: it waits for that, not for the new plan's 2d 20:00.
    assert_eq!(run(2 * DAY_MS + 2 * hour, 2), vec![2 * DAY_MS + 2 * hour]);
    // Queued for 22:00 today, and counted in the day's allowance: the catch-up takes
    // that fetch's place at once (within the catch-up spread), rather than losing it.
    let today = run(22 * hour, 3);
    assert!(
        today[0] >= 10 * hour && today[0] <= 10 * hour + CATCH_UP_SPREAD_MS,
        "{today:?}"
    );
    assert!(today.iter().all(|&t| t != 22 * hour), "{today:?}");
}

#[test]
fn a_snapshot_s_catch_ups_are_gated_by_the_allowance_it_comes_with() {
    let hour = DAY_MS / 24;
    // A worker's first snapshot: three daily feeds planned at 20:00, each last fetched
    // by another worker at 06:00 the day before, so all are a whole gap overdue at 10:00.
    // The allowance (at most a fetch per feed a day) leaves room for one today: one
    // catch-up goes, the others wait for their plan's time instead of being held at once.
    // Counting the feeds before the snapshot (none, once cleared) let all three through.
    let mut s = Schedule::new(0);
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 1,
            later_days: 3,
            counted: 0,
        }),
        10 * hour,
    );
    let ids = ["a", "b", "c"];
    for id in ids {
        s.note_last_fetch(id, 6 * hour - DAY_MS, false);
    }
    let feeds = ids
        .iter()
        .map(|id| feed(id, id, &[20 * hour], DAY_MS))
        .collect();
    s.apply_snapshot(1, feeds, 10 * hour).unwrap();
    let due: Vec<String> = s
        .pop_due(10 * hour + CATCH_UP_SPREAD_MS)
        .into_iter()
        .map(|d| d.feed_id)
        .collect();
    assert_eq!(due, vec!["a".to_string()]);
    assert_eq!(s.gate().held_total(), 0, "b and c wait for 20:00");
}

#[test]
fn a_days_room_takes_the_next_days_earliest_fetches_and_nothing_more() {
    let hour = DAY_MS / 24;
    let per_day = |s: &mut Schedule, days: i64| -> Vec<Vec<(String, i64)>> {
        let mut out = vec![Vec::new(); days as usize];
        let mut t = 0;
        while t < days * DAY_MS {
            for d in s.pop_due(t) {
                out[(t / DAY_MS) as usize].push((d.feed_id, t));
            }
            t += 60_000;
        }
        out
    };
    let allow = |fetches| Allowance {
        day: 0,
        fetches,
        later_days: fetches,
        counted: 0,
    };
    // Four daily feeds due at 00:05; a six-hourly one at 00:10, 06:10, ...
    let daily = |id: &str| feed(id, id, &[5 * 60_000], DAY_MS);
    let busy = feed("busy", "busy", &[10 * 60_000], 6 * hour);
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![daily("a"), daily("b"), daily("c"), daily("d"), busy.clone()],
        0,
    )
    .unwrap();
    // Room for 12 a day: day 0's plan has 8 fetches, so at 23:00 there is room for 4:
    // day 1's four daily fetches, the earliest, each moved by an hour to 23:05. On day
    // 1 the room is 8 and the busy feed's 00:10 comes too, by an eighth of its gap
    // (45 minutes) to 23:25.
    s.set_allowance(Some(allow(12)), 0);
    let days = per_day(&mut s, 3);
    let counts: Vec<usize> = days.iter().map(Vec::len).collect();
    assert_eq!(counts, vec![12, 9, 8], "{days:?}");
    let late = |day: &[(String, i64)], d: i64| -> Vec<(String, i64)> {
        day.iter()
            .filter(|(_, t)| *t >= d * DAY_MS + 23 * hour)
            .map(|(f, t)| (f.clone(), t - d * DAY_MS))
            .collect()
    };
    let at = |id: &str, t: i64| (id.to_string(), t);
    let daily_late = ["a", "b", "c", "d"].map(|id| at(id, 23 * hour + 5 * 60_000));
    assert_eq!(late(&days[0], 0), daily_late.to_vec());
    let mut day1 = daily_late.to_vec();
    day1.push(at("busy", 23 * hour + 25 * 60_000));
    assert_eq!(late(&days[1], 1), day1);
    // Each daily feed then keeps one fetch a day, an hour early; no day gets two.
    for day in &days[1..] {
        for id in ["a", "b", "c", "d"] {
            assert_eq!(day.iter().filter(|(f, _)| f == id).count(), 1);
        }
    }

    // Feeds on a timer keep their times: with "a" and "b" timed, day 0's sweep moves "c",
    // "d" and the busy feed's 00:10 instead, and "a" and "b" come at 00:05 every day (the
    // room left goes to an extra fetch in the sweep's first minutes besides the plan, which
    // moves no time).
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![
            daily("a").with_timed(true),
            daily("b").with_timed(true),
            daily("c"),
            daily("d"),
            busy.clone(),
        ],
        0,
    )
    .unwrap();
    s.set_allowance(Some(allow(12)), 0);
    let days = per_day(&mut s, 3);
    let timed = |(f, _): &(String, i64)| f == "a" || f == "b";
    let (extra, moved): (Vec<_>, Vec<_>) = late(&days[0], 0).into_iter().partition(timed);
    assert_eq!(extra.len(), 1, "{days:?}");
    assert!((23 * hour..=23 * hour + CATCH_UP_SPREAD_MS).contains(&extra[0].1));
    assert_eq!(
        moved,
        vec![
            at("c", 23 * hour + 5 * 60_000),
            at("d", 23 * hour + 5 * 60_000),
            at("busy", 23 * hour + 25 * 60_000),
        ],
        "{days:?}"
    );
    for (d, day) in days.iter().enumerate().skip(1) {
        for id in ["a", "b"] {
            let on_time = day
                .iter()
                .any(|(f, t)| f == id && *t == d as i64 * DAY_MS + 5 * 60_000);
            assert!(on_time, "{id} on day {d}: {day:?}");
        }
    }

    // Room for fewer than are due moves the earliest: two of four on day 0, the four
    // daily ones on day 1, and on day 2 the busy feed's too.
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![daily("a"), daily("b"), daily("c"), daily("d"), busy.clone()],
        0,
    )
    .unwrap();
    s.set_allowance(Some(allow(10)), 0);
    let counts: Vec<usize> = per_day(&mut s, 3).iter().map(Vec::len).collect();
    assert_eq!(counts, vec![10, 10, 9]);

    // Room beyond what an eighth of the gap brings takes the next ones by a quarter,
    // after the near ones: a six-hourly feed due at 00:50 (an eighth, 45 minutes, would
    // land at 00:05) comes by 90 minutes to 23:20, a daily one at 01:30 by two hours to
    // 23:30; one at 02:30 would need the next reach, and the room is spent.
    let late_busy = feed("late", "late", &[50 * 60_000], 6 * hour);
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![
            daily("a"),
            late_busy,
            feed("e", "e", &[90 * 60_000], DAY_MS),
            feed("f", "f", &[150 * 60_000], DAY_MS),
        ],
        0,
    )
    .unwrap();
    // Day 0's plan: a, late ×4, e, f = 7 fetches; room for 10 leaves 3.
    s.set_allowance(Some(allow(10)), 0);
    let days = per_day(&mut s, 1);
    assert_eq!(
        late(&days[0], 0),
        vec![
            at("a", 23 * hour + 5 * 60_000),
            at("late", 23 * hour + 20 * 60_000),
            at("e", 23 * hour + 30 * 60_000),
        ],
        "{days:?}"
    );

    // Room beyond that reaches further into the next day: by an eighth of the gap up to
    // six hours (a daily feed at 02:30 to 23:30, one fetched every other day at 05:00 to
    // 23:00), then by a quarter up to twelve (every other day at 10:00, to 22:00 and so
    // at its phase of the sweep, `catch_up_at`). A daily feed at 07:00 and an every-other-day one at 13:00 stay where they
    // are, however much room is left.
    let other_day =
        |id: &str, hour_of_day: i64| feed(id, id, &[DAY_MS + hour_of_day * hour], 2 * DAY_MS);
    let weekly = |id: &str| feed(id, id, &[5 * DAY_MS], 7 * DAY_MS);
    let reach_plans = vec![
        daily("a"),
        feed("f", "f", &[150 * 60_000], DAY_MS),
        other_day("g", 5),
        other_day("h", 10),
        feed("i", "i", &[7 * hour], DAY_MS),
        other_day("j", 13),
        weekly("k"),
        weekly("l"),
        weekly("m"),
    ];
    let minute_up = |t: i64| (t + 59_999) / 60_000 * 60_000;
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, reach_plans.clone(), 0).unwrap();
    // Day 0's plan: a, f, i; room for 9 (a fetch per feed, where the longer reaches
    // apply) leaves 6, more than there is to move. What is left goes besides the plan to
    // feeds fetched before: i at its phase of the sweep (j to m have no fetch yet to
    // space one from). The schedule is read every minute, so a phase shows at the next.
    s.set_allowance(Some(allow(9)), 0);
    let days = per_day(&mut s, 2);
    let mut moved = late(&days[0], 0);
    moved.sort();
    assert_eq!(
        moved,
        vec![
            at("a", 23 * hour + 5 * 60_000),
            at("f", 23 * hour + 30 * 60_000),
            at("g", 23 * hour),
            at("h", minute_up(catch_up_at("h", 2 * DAY_MS, 23 * hour))),
            at("i", minute_up(catch_up_at("i", DAY_MS, 23 * hour))),
        ],
        "{days:?}"
    );
    // The moved fetches stand for their day-1 times, which are not made again (day 1's
    // own sweep, at 23:00, moves day 2's).
    let before_sweep = |id: &str| {
        days[1]
            .iter()
            .filter(|(f, t)| f == id && *t < DAY_MS + 23 * hour)
            .count()
    };
    for id in ["f", "g", "h"] {
        assert_eq!(before_sweep(id), 0, "{id}");
    }
    // i's fetch besides the plan leaves its day-1 time where it was.
    assert_eq!(before_sweep("i"), 1);
    assert_eq!(before_sweep("j"), 1);
    // Above a fetch per feed a day only the first two reach: a alone moves, and f and i,
    // the feeds fetched before, get a fetch besides the plan.
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, reach_plans.clone(), 0).unwrap();
    s.set_allowance(Some(allow(20)), 0);
    let days = per_day(&mut s, 1);
    let mut late0 = late(&days[0], 0);
    late0.sort();
    assert_eq!(
        late0,
        vec![
            at("a", 23 * hour + 5 * 60_000),
            at("f", minute_up(catch_up_at("f", DAY_MS, 23 * hour))),
            at("i", minute_up(catch_up_at("i", DAY_MS, 23 * hour))),
        ]
    );

    // An allowance the day's own fetches use up leaves nothing to move.
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![daily("a"), daily("b"), busy.clone()], 0)
        .unwrap();
    s.set_allowance(Some(allow(6)), 0);
    let days = per_day(&mut s, 2);
    assert_eq!(days.iter().map(Vec::len).collect::<Vec<_>>(), vec![6, 6]);
    assert_eq!(days[0].iter().filter(|(_, t)| *t >= 23 * hour).count(), 0);

    // Without an allowance nothing moves.
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, vec![daily("a"), busy], 0).unwrap();
    let days = per_day(&mut s, 2);
    assert_eq!(days[0].iter().filter(|(_, t)| *t >= 23 * hour).count(), 0);
}

#[test]
fn a_late_sweep_spreads_what_it_moves_over_what_is_left_of_the_day() {
    // Twenty daily feeds at 00:05 and room for forty a day. After the 00:05 fetches the
    // worker's loop is next woken at 23:58 (held up): the sweep then moves the next day's
    // twenty 00:05 fetches, whose reach puts them before now, into this day at their
    // phases, all before midnight rather than up to ten minutes after it.
    let ids: Vec<String> = (0..20).map(|i| format!("d{i}")).collect();
    let mut s = Schedule::new(0);
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 40,
            later_days: 40,
            counted: 0,
        }),
        0,
    );
    let feeds = ids
        .iter()
        .map(|id| feed(id, id, &[5 * 60_000], DAY_MS))
        .collect();
    s.apply_snapshot(1, feeds, 0).unwrap();
    assert_eq!(s.pop_due(5 * 60_000).len(), 20, "the day's own");
    let late = DAY_MS - 2 * 60_000;
    let at_once = s.pop_due(late).len();
    let moved = at_once + s.pop_due(DAY_MS - 1).len();
    assert_eq!(moved, 20, "the next day's, moved into this one");
    assert_eq!(s.gate().started_today(), 40);
    assert!(at_once < 5, "{at_once} at the sweep's instant");
}

#[test]
fn a_loan_from_the_next_day_that_outgrows_its_first_hours_is_topped_up_besides_the_plan() {
    let hour = DAY_MS / 24;
    // Four daily feeds at 00:05 and four at noon: 8 fetches a day, 10 allowed. Each day's
    // sweep moves the next day's 00:05 fetches into it, and the next day starts that many
    // short, so the loan grows: 2 moved on day 0, 4 on day 1; from day 2 the 00:05 fetches
    // are all borrowed and the room is 6. The 2 moves leave go to the noon feeds, half-way
    // through their gap, besides their plan: every day spends its 10 (moving alone, days 2
    // and 3 spent 8), and every noon fetch comes as planned.
    let early = ["a", "b", "c", "d"].map(|id| feed(id, id, &[5 * 60_000], DAY_MS));
    let noon = ["n", "o", "p", "q"].map(|id| feed(id, id, &[12 * hour], DAY_MS));
    let mut s = Schedule::new(0);
    s.apply_snapshot(1, early.into_iter().chain(noon).collect(), 0)
        .unwrap();
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 10,
            later_days: 10,
            counted: 0,
        }),
        0,
    );
    let mut days = vec![Vec::new(); 4];
    let mut t = 0;
    while t < 4 * DAY_MS {
        for d in s.pop_due(t) {
            days[(t / DAY_MS) as usize].push((d.feed_id, t % DAY_MS));
        }
        t += 60_000;
    }
    assert_eq!(
        days.iter().map(Vec::len).collect::<Vec<_>>(),
        [10; 4],
        "{days:?}"
    );
    for (d, day) in days.iter().enumerate() {
        for id in ["n", "o", "p", "q"] {
            assert!(day.contains(&(id.to_string(), 12 * hour)), "day {d}: {id}");
        }
    }
    let besides = |d: usize| -> Vec<&str> {
        days[d]
            .iter()
            .filter(|(f, t)| {
                (23 * hour..=23 * hour + CATCH_UP_SPREAD_MS).contains(t)
                    && ["n", "o", "p", "q"].contains(&f.as_str())
            })
            .map(|(f, _)| f.as_str())
            .collect()
    };
    assert!(besides(0).is_empty() && besides(1).is_empty(), "{days:?}");
    assert_eq!((besides(2).len(), besides(3).len()), (2, 2), "{days:?}");
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
