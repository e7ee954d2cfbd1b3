//! Tests of the day's allowance in [`super::super`]: fetches held to the next day, held
//! backlogs, catch-ups gated by the day's room, the end-of-day sweep and loans from the
//! next day.

use super::*;

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
            per_minute: None,
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
            per_minute: None,
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
        per_minute: None,
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
                per_minute: None,
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
            per_minute: None,
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
        per_minute: None,
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
            per_minute: None,
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
            per_minute: None,
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
fn fetches_the_sweep_brings_forward_wait_for_minutes_with_room_under_a_minute_share() {
    use crate::allowance::DAY_MS;
    let hour = DAY_MS / 24;
    // Four daily feeds due at 00:05 and a six-hourly one at 00:10: day 0's plan has 8 of
    // its 12 fetches, and at 23:00 the sweep brings day 1's four 00:05 fetches to 23:05.
    // With a share of two a minute, two start at 23:05 and two wait for 23:06 or later,
    // still on day 0. The plan's own four at 00:05 start together: the coordinator levels
    // the plan, the worker holds only what it adds.
    let daily = |id: &str| feed(id, id, &[5 * 60_000], DAY_MS);
    let busy = feed("busy", "busy", &[10 * 60_000], 6 * hour);
    let mut s = Schedule::new(0);
    s.apply_snapshot(
        1,
        vec![daily("a"), daily("b"), daily("c"), daily("d"), busy],
        0,
    )
    .unwrap();
    s.set_allowance(
        Some(Allowance {
            day: 0,
            fetches: 12,
            later_days: 12,
            counted: 0,
            per_minute: Some(2),
        }),
        0,
    );
    let mut per_minute: HashMap<i64, Vec<(String, bool)>> = HashMap::new();
    let mut t = 0;
    while t < DAY_MS + hour {
        for d in s.pop_due(t) {
            per_minute
                .entry(t / 60_000)
                .or_default()
                .push((d.feed_id, d.besides_plan));
        }
        t += 1000;
    }
    let day0: usize = per_minute
        .iter()
        .filter(|(m, _)| **m < DAY_MS / 60_000)
        .map(|(_, v)| v.len())
        .sum();
    assert_eq!(day0, 12, "the sweep still fills day 0: {per_minute:?}");
    assert_eq!(per_minute[&5].len(), 4, "the plan's own minute");
    assert!(per_minute[&5].iter().all(|(_, extra)| !extra));
    let late: Vec<(i64, usize)> = per_minute
        .iter()
        .filter(|(m, _)| (23 * 60..24 * 60).contains(*m))
        .map(|(m, v)| (*m, v.len()))
        .collect();
    assert_eq!(late.iter().map(|(_, n)| n).sum::<usize>(), 4, "{late:?}");
    assert!(late.iter().all(|(_, n)| *n <= 2), "{late:?}");
    assert_eq!(s.minutes().deferred_total(), 2);
}
