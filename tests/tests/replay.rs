//! `kairos-coordinator synth` and `replay` as real processes: the live hub and the worker's
//! schedule, from an empty store on a synthetic trace, must beat uniform polling from the
//! second day, keep the budget, and come close to an offline planner with the same history.

use kairos_tests::{coordinator, TempDir};
use std::path::PathBuf;

/// A synthetic trace written by `synth` into `dir/trace` with `flags`; its path.
fn synth(dir: &TempDir, flags: &[&str]) -> PathBuf {
    let trace = dir.path().join("trace");
    let mut args = vec!["synth", "--out", trace.to_str().unwrap()];
    args.extend_from_slice(flags);
    let o = coordinator(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    trace
}

/// Three days of 60 feeds: enough for the runs that check what `replay` says, not how well.
fn small(dir: &TempDir) -> PathBuf {
    synth(
        dir,
        &[
            "--feeds", "60", "--users", "20", "--days", "3", "--seed", "7",
        ],
    )
}

/// The line of `replay ARGS`' report that starts with `prefix` (the run must succeed).
fn report_line(args: &[&str], prefix: &str) -> String {
    let o = coordinator(args);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line `{prefix}`:\n{stdout}"))
        .to_string()
}

/// The number right after `key` in `line`.
fn number_after(line: &str, key: &str) -> f64 {
    let at = line.find(key).unwrap_or_else(|| panic!("{key}: {line}")) + key.len();
    let n: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    n.trim_end_matches('.')
        .parse()
        .unwrap_or_else(|_| panic!("{key}: {line}"))
}

#[test]
fn the_live_system_learns_a_trace_from_an_empty_store() {
    let dir = TempDir::new("replay");
    let trace = synth(
        &dir,
        &[
            "--feeds", "300", "--users", "80", "--days", "16", "--seed", "5",
        ],
    );
    let json = dir.path().join("days.json");
    let svg = dir.path().join("days.svg");
    let o = coordinator(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--train-days",
        "7",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let days: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(days.len(), 16, "{stdout}");
    let delay = |d: &serde_json::Value, k: &str| d[k]["avg_delay_min"].as_f64().unwrap();
    // The budget (4 a day for 300 feeds) is kept over the run, first-sight fetches
    // included: what day 0 spent ahead is paid back on the next days.
    let total: f64 = days
        .iter()
        .map(|d| d["live"]["fetches"].as_f64().unwrap())
        .sum();
    assert!(
        (0.98 * 16.0 * 1200.0..=1.005 * 16.0 * 1200.0).contains(&total),
        "{total} fetches in 16 days\n{stdout}"
    );
    // Day 0 holds the first sights and the rest of its budget, paced round by round: it
    // spends the day's budget, within 2% and never above.
    let day0 = days[0]["live"]["fetches"].as_f64().unwrap();
    assert!(
        (0.98 * 1200.0..=1200.0).contains(&day0),
        "day 0: {day0} fetches\n{stdout}"
    );
    for d in &days[1..] {
        let day = d["day"].as_u64().unwrap();
        // Neither lost nor exceeded by replans, day by day.
        let fetches = d["live"]["fetches"].as_f64().unwrap();
        assert!(
            (0.85 * 1200.0..=1.05 * 1200.0).contains(&fetches),
            "day {day}: {fetches} fetches\n{stdout}"
        );
        // Below 0.75× uniform polling from the second day (0.8 on the first full day).
        let bound = if day == 1 { 0.8 } else { 0.75 };
        assert!(
            delay(d, "live") < bound * delay(d, "uniform"),
            "day {day}\n{stdout}"
        );
    }
    // From day 7, close to an offline optimal planner with the same history (delay per
    // posting over those days).
    let per_posting = |k: &str| -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for d in &days[7..] {
            let p = d[k]["postings"].as_f64().unwrap();
            sum += d[k]["avg_delay_min"].as_f64().unwrap() * p;
            n += p;
        }
        sum / n
    };
    let ratio = per_posting("live") / per_posting("offline_causal");
    assert!(
        ratio < 1.08,
        "live / offline on days 7-15: {ratio:.3}\n{stdout}"
    );
    // The peers' schedulers ran beside it, each with its defaults and tuned to spend the
    // live run's fetches of days 7-15 on those days; the live system beats the best tuned
    // one there.
    let peers = days[0]["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 14, "{stdout}");
    // One peer's figures on one day.
    let peer_day = |d: &serde_json::Value, label: &str| -> serde_json::Value {
        d["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == label)
            .unwrap_or_else(|| panic!("{label} missing\n{stdout}"))[1]
            .clone()
    };
    let peer_delay = |label: &str| -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for d in &days[7..] {
            let r = peer_day(d, label);
            let p = r["postings"].as_f64().unwrap();
            sum += r["avg_delay_min"].as_f64().unwrap() * p;
            n += p;
        }
        sum / n
    };
    let best = peers
        .iter()
        .map(|p| p[0].as_str().unwrap())
        .filter(|l| l.ends_with("(tuned)"))
        .map(peer_delay)
        .fold(f64::INFINITY, f64::min);
    let live = per_posting("live");
    assert!(
        live < 0.9 * best,
        "live {live:.1} against the best tuned peer {best:.1} on days 7-15\n{stdout}"
    );
    let live_fetches: f64 = days[7..]
        .iter()
        .map(|d| d["live"]["fetches"].as_f64().unwrap())
        .sum();
    let mut reached = 0;
    for p in peers
        .iter()
        .filter(|p| p[0].as_str().unwrap().ends_with("(tuned)"))
    {
        let label = p[0].as_str().unwrap();
        let fetches: f64 = days[7..]
            .iter()
            .map(|d| peer_day(d, label)["fetches"].as_f64().unwrap())
            .sum();
        // Within 3% below; or, for a rule the search leaves short (Nutch's adaptive
        // interval here), fewer, and said.
        let name = label.trim_end_matches(" (tuned)");
        let said = stdout.lines().any(|l| {
            l.trim_start().starts_with(&format!("{name} ")) && l.contains("below the budget")
        });
        assert!(
            (0.97 * live_fetches..=live_fetches).contains(&fetches)
                || (said && fetches < 0.97 * live_fetches),
            "{label}: {fetches} fetches on days 7-15 against the live {live_fetches}\n{stdout}"
        );
        reached += usize::from(!said);
    }
    assert!(
        reached >= 6,
        "{reached} of 7 tuned peers spent the budget\n{stdout}"
    );
    assert!(stdout.contains("kairos / best tuned peer"), "{stdout}");
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.contains("Kairos (live)"));
    assert!(picture.contains("commafeed (tuned)"));

    // Postings lost to the 20-item documents are counted per plan: uniform polling loses
    // some on this trace's busiest feeds; the live plan's document floors keep nearly all.
    let lost = |k: &str| -> u64 {
        days.iter()
            .map(|d| d["scrolled_off"][k].as_u64().unwrap())
            .sum()
    };
    assert!(lost("uniform") >= 10, "{stdout}");
    assert!(lost("live") * 4 <= lost("uniform"), "{stdout}");
    assert!(
        stdout.contains("scrolled off a 20-item document"),
        "{stdout}"
    );
    // And on the scored days, for the live run and each tuned peer: the live figure is the
    // days' own.
    let scored_lost: Vec<(String, u64)> = stdout
        .lines()
        .filter_map(|l| {
            let (head, n) = l.split_once("postings scrolled off on those days: ")?;
            let name = head.split_whitespace().next()?.to_string();
            Some((name, n.trim().parse().ok()?))
        })
        .collect();
    assert_eq!(scored_lost.len(), 8, "live and the 7 tuned peers\n{stdout}");
    let live_scored_lost: u64 = days[7..]
        .iter()
        .map(|d| d["scrolled_off"]["live"].as_u64().unwrap())
        .sum();
    assert_eq!(
        scored_lost[0],
        ("kairos".to_string(), live_scored_lost),
        "{stdout}"
    );
    // The same days with each lost posting charged a day of delay (the plans' price by
    // default), for the live run and the best tuned peer so charged: figures recomputed
    // here from the days' delays and losses in the JSON.
    let priced = |delay_of: &dyn Fn(&serde_json::Value) -> serde_json::Value,
                  lost_of: &dyn Fn(&serde_json::Value) -> u64|
     -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for d in &days[7..] {
            let r = delay_of(d);
            let p = r["postings"].as_f64().unwrap();
            sum += r["avg_delay_min"].as_f64().unwrap() * p + lost_of(d) as f64 * 24.0 * 60.0;
            n += p;
        }
        sum / n
    };
    let live_priced = priced(&|d| d["live"].clone(), &|d| {
        d["scrolled_off"]["live"].as_u64().unwrap()
    });
    let (best_name, best_priced) = peers
        .iter()
        .enumerate()
        .filter(|(_, p)| p[0].as_str().unwrap().ends_with("(tuned)"))
        .map(|(i, p)| {
            let v = priced(&|d| d["peers"][i][1].clone(), &|d| {
                d["peers_scrolled_off"][i].as_u64().unwrap()
            });
            (p[0].as_str().unwrap().trim_end_matches(" (tuned)"), v)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    // A lost posting costs more than any delay this trace's plans leave, so charging them
    // raises every figure that lost one.
    assert!(live_scored_lost == 0 || live_priced > per_posting("live"));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("with each lost posting charged 24 h of delay"))
        .unwrap_or_else(|| panic!("no priced line\n{stdout}"));
    let expected = format!(
        "days 7+: kairos (live) {live_priced:.2} min, best tuned peer {best_priced:.2} min ({best_name}); kairos / best tuned peer, losses priced {:.3}",
        live_priced / best_priced
    );
    assert!(line.ends_with(&expected), "{line}\nexpected …{expected}");
    // After a week the plans deliver what they expect: realized within 15% of expected.
    let (mut expected, mut n) = (0.0, 0.0);
    for d in &days[7..] {
        let p = d["live"]["postings"].as_f64().unwrap();
        expected += d["expected_delay_min"].as_f64().unwrap() * p;
        n += p;
    }
    let gap = per_posting("live") / (expected / n);
    assert!(
        (gap - 1.0).abs() < 0.15,
        "realized / expected on days 7-15: {gap:.3}\n{stdout}"
    );
    // That promise is the model's figure recalibrated by the plans' record, which has
    // spoken by then (1 exactly only before 50 found postings) and stays near 1 here.
    let ratios: Vec<f64> = days[7..]
        .iter()
        .map(|d| d["promise_ratio"].as_f64().unwrap())
        .collect();
    assert!(
        ratios.iter().all(|r| (0.67..=1.5).contains(r)) && ratios.iter().any(|&r| r != 1.0),
        "promise ratios on days 7-15: {ratios:?}"
    );

    // The reader metric on the same trace, from the same empty store: it beats the delay
    // plan on its own measure from the second day, and comes within 6% of the offline
    // `miss` plan with the same history from day 7 (one fixed pseudo-day of shrinkage,
    // before it was chosen on held-out days, left it 7% above).
    let miss_json = dir.path().join("miss.json");
    let o = coordinator(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--train-days",
        "7",
        "--metric",
        "miss",
        "--json",
        miss_json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let miss: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&miss_json).unwrap()).unwrap();
    let missed = |d: &serde_json::Value, k: &str| d[k]["missed_per_access"].as_f64().unwrap();
    for (m, d) in miss[2..].iter().zip(&days[2..]) {
        let day = m["day"].as_u64().unwrap();
        assert!(
            missed(m, "live") < missed(d, "live"),
            "day {day}: the miss plan misses more than the delay plan\n{stdout}"
        );
        assert!(
            m["shrinkage_days"].as_f64().is_some(),
            "day {day}: shrinkage not reported\n{stdout}"
        );
        let regimes = &m["regime_feeds"];
        assert!(
            regimes["rising"].as_u64().is_some() && regimes["falling"].as_u64().is_some(),
            "day {day}: feeds whose regime changed not reported: {regimes}\n{stdout}"
        );
    }
    let per_access = |k: &str| -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for d in &miss[7..] {
            let a = d[k]["accesses"].as_f64().unwrap();
            sum += d[k]["missed_per_access"].as_f64().unwrap() * a;
            n += a;
        }
        sum / n
    };
    let ratio = per_access("live") / per_access("offline_causal");
    assert!(
        ratio < 1.06,
        "miss, live / offline on days 7-15: {ratio:.3}\n{stdout}"
    );
}

#[test]
fn a_frozen_replay_stops_replanning_and_keeps_fetching_its_last_plan() {
    let dir = TempDir::new("replay-freeze");
    let trace = small(&dir);
    let json = dir.path().join("days.json");
    let o = coordinator(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--train-days",
        "1",
        "--freeze-after-days",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Replans every 2 simulated hours up to and including the end of day 1: 0 h ... 24 h.
    assert!(stdout.contains(" 13 replans"), "{stdout}");
    let days: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // The last plan keeps being fetched at the budget (4 a day for 60 feeds).
    let fetches = days[2]["live"]["fetches"].as_f64().unwrap();
    assert!((fetches / 240.0 - 1.0).abs() < 0.1, "{fetches}\n{stdout}");
}

/// With `--max-fetches-per-minute` the worker holds its own fetches besides the plan
/// (catch-ups after a replan, first sights, fetches held from a spent day) to its share of
/// the cap, not only the plan's: on half timer feeds with bursts and feeds that start and
/// stop, at a cap of two a minute, the fetches besides the plan put 11 fetches in 10
/// minutes above the cap when the worker was dealt no share (checked by dealing none).
#[test]
fn a_minute_cap_holds_the_workers_own_fetches_too() {
    let dir = TempDir::new("replay-minute-cap");
    let flags = "--feeds 120 --users 40 --days 4 --seed 5 --timer-share 0.5 --start-stop 0.3 \
                 --bursts-per-week 2";
    let trace = synth(&dir, &flags.split_whitespace().collect::<Vec<_>>());
    let trace = trace.to_str().unwrap();
    let args = format!(
        "replay --trace {trace} --fetches-per-feed-per-day 2 --peers none \
         --max-fetches-per-minute 2"
    );
    let line = report_line(
        &args.split_whitespace().collect::<Vec<_>>(),
        "fetches per minute on the scored days",
    );
    let after = |key: &str| number_after(&line, key);
    assert_eq!(after("busiest "), 2.0, "{line}");
    assert_eq!(after("minutes above the cap of 2: "), 0.0, "{line}");
    assert_eq!(after("on the plan's times, "), 0.0, "{line}");
    // Some were held, and not for long.
    assert!(after("held to a later minute: ") >= 20.0, "{line}");
    assert!(after("waited ") < 30.0, "{line}");
}

/// The plans' days against the day's budget, as `replay` reports them, on feeds that post a
/// tenth as much at weekends: the daily plan asks each day its budget, and so, by its day
/// prices, does the weekly one. Without them it asked up to 1.35 of a weekday's budget, a
/// day over 1.05 in 275 of 336 rounds and a median busiest day of 1.2 (docs/EXPERIMENTS.md,
/// "Weekly plans against the day's budget"; at d9eab25 this test asserted that).
#[test]
fn a_weekly_plans_days_are_priced_even() {
    let dir = TempDir::new("replay-week-days");
    let trace = synth(
        &dir,
        &[
            "--feeds",
            "60",
            "--users",
            "20",
            "--days",
            "21",
            "--weekend-factor",
            "0.1",
            "--seed",
            "11",
        ],
    );
    // (quietest lowest, busiest median, rounds over) from the report's line.
    let days = |weekly: bool| -> (f64, f64, usize) {
        let mut args = vec![
            "replay",
            "--trace",
            trace.to_str().unwrap(),
            "--fetches-per-feed-per-day",
            "2",
            "--peers",
            "none",
        ];
        if weekly {
            args.push("--weekly");
        }
        let line = report_line(&args, "plans' days against the day's budget");
        let after = |key: &str| number_after(&line, key);
        let over = after("rounds with a day over 1.05: ") as usize;
        (
            after("quietest day lowest "),
            after("busiest day median "),
            over,
        )
    };
    let (lo, median, over) = days(false);
    assert!(
        median <= 1.05 && lo > 0.9 && over == 0,
        "daily: {lo} {median} {over}"
    );
    // 60 feeds at two a day: one feed's fetches moved by a day are 1.7% of a day's, and
    // models still change from round to round, so some rounds are over 1.05 before their
    // prices catch up (59 of 336 here).
    let (lo, median, over) = days(true);
    assert!(median <= 1.05 && over < 120, "weekly: {lo} {median} {over}");
}

/// A window of days with no posting has no delay to show: `-` for every policy, live
/// included, not a delay of zero.
#[test]
fn a_window_without_postings_shows_no_figure() {
    let dir = TempDir::new("replay-empty-window");
    let trace = dir.path().join("trace");
    std::fs::create_dir_all(&trace).unwrap();
    std::fs::write(trace.join("feeds.csv"), "feed_id,weight\na,1\nb,1\n").unwrap();
    // Postings on day 0 only; the trace runs three days (a posting at the last second).
    let mut postings = String::from("feed_id,ts\n");
    for i in 0..20 {
        postings += &format!("{},{}\n", ["a", "b"][i % 2], 1_000 + i * 3_000);
    }
    postings += "a,259199\n";
    std::fs::write(trace.join("postings.csv"), postings).unwrap();
    let o = coordinator(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--days",
        "2",
        "--peers",
        "none",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let live = stdout
        .lines()
        .skip_while(|l| !l.starts_with("by window"))
        .find(|l| l.starts_with("kairos (live)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    // Day 0 has its figure; day 1, without a posting, has none.
    let cells: Vec<&str> = live.split_whitespace().collect();
    assert_eq!(cells.len(), 5, "{live}");
    assert!(cells[2].parse::<f64>().is_ok_and(|d| d > 0.0), "{live}");
    assert_eq!(cells[3], "-", "{live}");
}

/// The priced line says where its price comes from: the plans' own when they price lost
/// postings, the default day when they keep the document floors instead.
#[test]
fn the_priced_line_names_its_price() {
    let dir = TempDir::new("replay-priced");
    let trace = small(&dir);
    for (flag, said) in [
        ("8", "charged 8 h of delay (the plans' price), days 1+: "),
        (
            "floors",
            "charged 24 h of delay (the default price; these plans use floors), days 1+: ",
        ),
    ] {
        let o = coordinator(&[
            "replay",
            "--trace",
            trace.to_str().unwrap(),
            "--train-days",
            "1",
            "--peers",
            "stormcrawler",
            "--lost-posting-hours",
            flag,
        ]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("with each lost posting") && l.contains(said)),
            "--lost-posting-hours {flag}\n{stdout}"
        );
    }
}

/// `--peer-budget both`: a tuned peer spends no more than the live run on the scored days
/// and no more over the whole run either, and comes within 3% of the bound that binds.
/// StormCrawler's rule starts every feed at its shortest interval, so tuned on the scored
/// days alone it spends more than the live run on the days before them; held to both, it
/// spends no more than the live run from day 0.
#[test]
fn peers_held_to_the_whole_runs_budget_spend_no_more_from_day_0() {
    let dir = TempDir::new("replay-peer-budget");
    let trace = synth(
        &dir,
        &[
            "--feeds",
            "120",
            "--users",
            "30",
            "--days",
            "8",
            "--posts-per-day",
            "0.5",
            "--start-stop",
            "0.3",
            "--seed",
            "3",
        ],
    );
    let run = |budget: &str| {
        let json = dir.path().join(format!("days-{budget}.json"));
        let o = coordinator(&[
            "replay",
            "--trace",
            trace.to_str().unwrap(),
            "--train-days",
            "4",
            "--fetches-per-feed-per-day",
            "1",
            "--peers",
            "stormcrawler,commafeed",
            "--peer-budget",
            budget,
            "--json",
            json.to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let days: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (days, stdout)
    };
    // Fetches of `label` ("live" or a peer's label) on days [from, to).
    let fetches = |days: &[serde_json::Value], label: &str, from: usize, to: usize| -> f64 {
        days[from..to]
            .iter()
            .map(|d| {
                if label == "live" {
                    d["live"]["fetches"].as_f64().unwrap()
                } else {
                    let p = d["peers"].as_array().unwrap();
                    let p = p.iter().find(|p| p[0] == label).unwrap();
                    p[1]["fetches"].as_f64().unwrap()
                }
            })
            .sum()
    };
    let (scored, out_scored) = run("scored");
    let (both, out_both) = run("both");
    assert!(
        out_both.contains("and at most its"),
        "the bound is said\n{out_both}"
    );
    let n = both.len();
    // The live run is the same in both: only the peers' tuning differs.
    assert_eq!(fetches(&scored, "live", 0, n), fetches(&both, "live", 0, n));
    let (live_scored, live_all) = (fetches(&both, "live", 4, n), fetches(&both, "live", 0, n));
    for label in ["stormcrawler (tuned)", "commafeed (tuned)"] {
        let (s, a) = (fetches(&both, label, 4, n), fetches(&both, label, 0, n));
        assert!(
            s <= live_scored && a <= live_all,
            "{label}: {s} on the scored days (live {live_scored}), {a} in all (live {live_all})\n{out_both}"
        );
        assert!(
            s >= 0.97 * live_scored || a >= 0.97 * live_all,
            "{label}: {s} / {live_scored}, {a} / {live_all}: neither bound reached\n{out_both}"
        );
    }
    // Tuned on the scored days alone, StormCrawler spends more than the live run over the
    // whole run on this trace: the case the second bound is for.
    let sc_all = fetches(&scored, "stormcrawler (tuned)", 0, n);
    assert!(
        sc_all > live_all,
        "stormcrawler tuned on the scored days: {sc_all} in all, live {live_all}\n{out_scored}"
    );
}

#[test]
fn replay_refuses_bad_input_clearly() {
    let o = coordinator(&["replay", "--trace", "/nonexistent/trace"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("loading trace"), "{err}");
    let o = coordinator(&[
        "replay",
        "--trace",
        "/nonexistent/trace",
        "--fetches-per-feed-per-day",
        "-1",
    ]);
    assert!(!o.status.success());
    for bad in ["0", "-2", "NaN", "lots"] {
        let arg = format!("--shrinkage-days={bad}");
        let o = coordinator(&["replay", "--trace", "/nonexistent/trace", &arg]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--shrinkage-days"), "{bad}: {err}");
    }
    // The peers' fetch logs with no peer to run: refused, not an empty folder.
    let dir = std::env::temp_dir().join(format!("kairos-peer-logs-{}", std::process::id()));
    let dir_arg = dir.display().to_string();
    let o = coordinator(&[
        "replay",
        "--trace",
        "/nonexistent/trace",
        "--peers",
        "none",
        "--peer-fetch-logs",
        &dir_arg,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--peer-fetch-logs"), "{err}");
    assert!(!dir.exists());
}
