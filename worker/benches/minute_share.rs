//! What holding the worker's own fetches to its share of the per-minute cap costs the
//! schedule (`kairos_runtime::minute_gate`), beside the same day without a share.
//!
//! 100,000 daily feeds on 10,000 hosts, each at a random second of the day; a replan at
//! midnight finds 20,000 of them a whole gap overdue, so their catch-ups are fetches besides
//! the plan. The schedule is driven through one simulated day, `pop_due` every simulated
//! second, with a share of `SHARE` a minute (the plan's mean is 69.4) and without one. Each
//! setting runs `RUNS` times, interleaved; the medians of the wall time are printed with the
//! day's busiest minute, the fetches deferred and the longest wait.
//!
//! Run: `cargo bench -p kairos-worker --bench minute_share -- [RUNS] [SHARE]` (defaults 5, 80).

use kairos_runtime::allowance::{Allowance, DAY_MS};
use kairos_runtime::schedule::{FeedTimes, Schedule};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::Instant;

const FEEDS: usize = 100_000;
const OVERDUE: usize = 20_000;

/// One simulated day: (wall seconds, fetches, busiest minute, deferred, longest wait in s).
fn day(share: Option<u64>) -> (f64, usize, usize, u64, i64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let feeds: Vec<FeedTimes> = (0..FEEDS)
        .map(|i| FeedTimes {
            feed_id: format!("feed-{i}"),
            host: format!("host-{}", i % 10_000),
            offsets_ms: vec![rng.gen_range(0..86_400) * 1000],
            period_ms: DAY_MS,
            origin_ms: 0,
            timed: false,
        })
        .collect();
    let mut s = Schedule::new(0);
    for f in feeds.iter().take(OVERDUE) {
        s.note_last_fetch(&f.feed_id, DAY_MS - 30 * 3_600_000, false);
    }
    s.set_allowance(
        Some(Allowance {
            day: 1,
            // The day's plan and the catch-ups: the end-of-day sweep has nothing to fill.
            fetches: (FEEDS + OVERDUE) as u64,
            later_days: FEEDS as u64,
            counted: 0,
            per_minute: share,
        }),
        DAY_MS,
    );
    let started = Instant::now();
    s.apply_snapshot(1, feeds, DAY_MS).unwrap();
    let mut per_minute: HashMap<i64, usize> = HashMap::new();
    let (mut fetches, mut longest) = (0, 0);
    for t in (DAY_MS..2 * DAY_MS).step_by(1000) {
        for d in s.pop_due(t) {
            fetches += 1;
            *per_minute.entry(t / 60_000).or_default() += 1;
            longest = longest.max(t - d.planned_ms);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let busiest = per_minute.values().copied().max().unwrap_or(0);
    (
        wall,
        fetches,
        busiest,
        s.minutes().deferred_total(),
        longest / 1000,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let runs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let share: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(80);
    let mut walls: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut last = [None, None];
    for _ in 0..runs {
        for (k, setting) in [None, Some(share)].into_iter().enumerate() {
            let r = day(setting);
            walls[k].push(r.0);
            last[k] = Some(r);
        }
    }
    for (k, name) in ["no share", "share"].iter().enumerate() {
        let w = &mut walls[k];
        w.sort_by(f64::total_cmp);
        let (_, fetches, busiest, deferred, longest) = last[k].expect("at least one run");
        println!(
            "{name:>8}: median {:.3} s a simulated day ({} runs); {fetches} fetches, busiest minute {busiest}, deferred {deferred}, longest wait {longest} s",
            w[w.len() / 2],
            w.len()
        );
    }
    let m = |k: usize| walls[k][walls[k].len() / 2];
    println!("ratio share / no share: {:.2}", m(1) / m(0));
}
