//! Synthetic traces for benchmarks and tests: heavy-tailed posting rates, diurnal shapes
//! from a dozen templates with random shifts, weekends at a chosen share of the weekday
//! rate, and readers with morning, lunch and evening peaks; optionally drift, bursts, feeds
//! that start or stop, and feeds on a timer. Deterministic for a seed. Not
//! tuned to any sample trace. [`write()`] stores a trace in the CSV format [`Trace::load`]
//! reads (`kairos-coordinator synth`).

use crate::trace::{Access, FeedRow, Trace};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Poisson};

/// Size of a synthetic trace.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    /// Feeds.
    pub feeds: usize,
    /// Users.
    pub users: usize,
    /// Days.
    pub days: usize,
    /// Mean postings per feed per day.
    pub mean_posts_per_day: f64,
    /// Subscriptions per user.
    pub subs_per_user: usize,
    /// Mean accesses per user per day.
    pub accesses_per_user_per_day: f64,
    /// Posting rate on Saturdays and Sundays relative to weekdays (day 0 is a Monday); 1
    /// for no weekly effect.
    pub weekend_factor: f64,
    /// Politeness groups the feeds share (feed `f` on host `h{f mod hosts}`); 0 leaves the
    /// trace without hosts.
    pub hosts: usize,
    /// Random seed.
    pub seed: u64,
    /// How feeds change over the trace (none by default).
    pub dynamics: Dynamics,
}

/// How a synthetic population changes over time, the way real ones do: rates that drift,
/// bursts, feeds that start or stop. All zero: every feed keeps its rate and shape.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dynamics {
    /// Standard deviation of a feed's daily log-rate step (a random walk from day 0).
    pub drift: f64,
    /// Bursts per feed per week: each starts at a uniform time and adds
    /// `burst_postings` postings (Poisson mean) within the hour after it.
    pub bursts_per_week: f64,
    /// Mean postings of one burst.
    pub burst_postings: f64,
    /// Share of feeds that start late (half of them) or stop early (the other half), at a
    /// uniform time within the middle 60% of the trace.
    pub start_stop: f64,
    /// Share of feeds on a timer: a nightly job, a scheduled post. Such a feed posts its
    /// day's postings (Poisson, its rate) within [`TIMER_JITTER_S`] after a clock time of
    /// its own, drawn once, instead of over its daily shape; bursts still come at random.
    pub timer_share: f64,
    /// Clock times a timer feed posts at (a morning and an evening digest: 2); each of
    /// its postings goes to one of them at random. 0 and 1 both mean one.
    pub timer_windows: usize,
}

/// How late after its clock time a timer feed's posting lands (uniform), seconds: a job's
/// run time, a queue.
pub const TIMER_JITTER_S: f64 = 600.0;

/// What generated a trace: each feed's expected postings per hour of the trace (hour `i`
/// is `[i·3600, (i+1)·3600)` s), so a plan made from it shows the limit of learning.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// Per feed, per hour of the trace.
    pub per_hour: Vec<Vec<f32>>,
}

impl Truth {
    /// A feed's expected postings per hour over day `d` (24 values; zeros past the end).
    pub fn day(&self, feed: usize, d: usize) -> Vec<f32> {
        let h = &self.per_hour[feed];
        (d * 24..(d + 1) * 24)
            .map(|i| h.get(i).copied().unwrap_or(0.0))
            .collect()
    }
}

/// Hourly weight of template `t` at hour `h` (before shifting).
fn template(t: usize, h: usize) -> f64 {
    let h = h as f64;
    let bump = |c: f64, w: f64| (-((h - c) / w).powi(2) / 2.0).exp();
    match t % 12 {
        0 => 0.05 + bump(13.0, 3.0),                  // office hours
        1 => 0.05 + bump(20.0, 2.0),                  // evening
        2 => 0.02 + bump(9.0, 0.8),                   // bursty morning window
        3 => 1.0,                                     // flat
        4 => 0.05 + bump(9.0, 1.5) + bump(17.0, 1.5), // bimodal
        5 => 0.02 + bump(3.0, 2.0),                   // night (another time zone)
        6 => 0.1 + bump(12.0, 5.0),                   // broad day
        7 => 0.02 + bump(16.0, 0.8),                  // bursty afternoon
        8 => 0.05 + bump(7.0, 2.0),                   // early
        9 => 0.05 + bump(22.0, 1.5),                  // late
        10 => 0.3 + bump(11.0, 2.5),                  // mild peak
        _ => 0.05 + bump(6.0, 1.0) + bump(14.0, 1.0) + bump(21.0, 1.0),
    }
}

/// Generates a trace in memory.
pub fn generate(cfg: &SynthConfig) -> Trace {
    generate_with_truth(cfg).0
}

/// Generates a trace and the intensities it was drawn from.
pub fn generate_with_truth(cfg: &SynthConfig) -> (Trace, Truth) {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    // The dynamics draw from their own stream: a trace without them is the same as before
    // they existed.
    let mut dyn_rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed_d1a5_0000_0001);
    let dy = cfg.dynamics;
    let mut truth = Truth::default();
    let day = 86_400.0;
    let sigma: f64 = 1.2;
    let rate_dist = LogNormal::new(cfg.mean_posts_per_day.ln() - sigma * sigma / 2.0, sigma)
        .expect("valid lognormal");
    let mut feeds = Vec::with_capacity(cfg.feeds);
    let mut postings = Vec::with_capacity(cfg.feeds);
    for f in 0..cfg.feeds {
        let rate: f64 = rate_dist.sample(&mut rng);
        let t = rng.gen_range(0..12);
        let shift = rng.gen_range(-3i32..=3);
        let weights: Vec<f64> = (0..24)
            .map(|h| template(t, (h - shift).rem_euclid(24) as usize))
            .collect();
        let sum: f64 = weights.iter().sum();
        let mut ts = Vec::new();
        let mut hourly = Vec::with_capacity(cfg.days * 24);
        // Active span, seconds: the whole trace unless the feed starts or stops.
        let span = cfg.days as f64 * day;
        let (from, to) = if dy.start_stop > 0.0 && dyn_rng.gen::<f64>() < dy.start_stop {
            let at = span * (0.2 + 0.6 * dyn_rng.gen::<f64>());
            if dyn_rng.gen::<bool>() {
                (at, span)
            } else {
                (0.0, at)
            }
        } else {
            (0.0, span)
        };
        // A timer feed's clock times, seconds into the day (each window stays within the
        // day). One time draws nothing more, so one-window traces are those drawn before
        // there could be more.
        let timer: Option<Vec<f64>> =
            (dy.timer_share > 0.0 && dyn_rng.gen::<f64>() < dy.timer_share).then(|| {
                (0..dy.timer_windows.max(1))
                    .map(|_| dyn_rng.gen::<f64>() * (day - TIMER_JITTER_S))
                    .collect()
            });
        let mut log_level = 0.0f64;
        let burst_rate = dy.bursts_per_week / 7.0;
        for d in 0..cfg.days {
            let weekend = if d % 7 >= 5 { cfg.weekend_factor } else { 1.0 };
            if d > 0 && dy.drift > 0.0 {
                let step: f64 = rand_distr::StandardNormal.sample(&mut dyn_rng);
                log_level += dy.drift * step;
            }
            let level = log_level.exp();
            if let Some(times) = &timer {
                let lambda = rate * weekend * level;
                let start = d as f64 * day;
                let windows = times.len();
                for h in 0..24 {
                    let (lo, hi) = (start + h as f64 * 3600.0, start + (h + 1) as f64 * 3600.0);
                    // The windows' share in this hour, active part only.
                    let share: f64 = times
                        .iter()
                        .map(|&at| {
                            let (a, b) = (
                                (start + at).max(lo).max(from),
                                (start + at + TIMER_JITTER_S).min(hi).min(to),
                            );
                            ((b - a) / TIMER_JITTER_S).max(0.0)
                        })
                        .sum::<f64>()
                        / windows as f64;
                    let on = ((to.min(hi) - from.max(lo)) / 3600.0).clamp(0.0, 1.0);
                    hourly
                        .push((lambda * share + burst_rate * dy.burst_postings / 24.0 * on) as f32);
                }
                let k = Poisson::new(lambda)
                    .map(|p| p.sample(&mut dyn_rng) as usize)
                    .unwrap_or(0);
                for _ in 0..k {
                    let at = if windows == 1 {
                        times[0]
                    } else {
                        times[dyn_rng.gen_range(0..windows)]
                    };
                    let t = start + at + dyn_rng.gen::<f64>() * TIMER_JITTER_S;
                    if (from..to).contains(&t) {
                        ts.push(t);
                    }
                }
            } else {
                for (h, w) in weights.iter().enumerate() {
                    let start = d as f64 * day + h as f64 * 3600.0;
                    // Share of the hour the feed is active.
                    let on = ((to.min(start + 3600.0) - from.max(start)) / 3600.0).clamp(0.0, 1.0);
                    let lambda = rate * weekend * w / sum;
                    hourly.push(
                        ((lambda * level + burst_rate * dy.burst_postings / 24.0) * on) as f32,
                    );
                    if lambda <= 0.0 {
                        continue;
                    }
                    let k = Poisson::new(lambda)
                        .map(|p| p.sample(&mut rng) as usize)
                        .unwrap_or(0);
                    for _ in 0..k {
                        let t = d as f64 * day + (h as f64 + rng.gen::<f64>()) * 3600.0;
                        // Drift thins (or adds to) the steady draw, so a feed without dynamics
                        // draws exactly what it drew before.
                        if (from..to).contains(&t) && (level >= 1.0 || dyn_rng.gen::<f64>() < level)
                        {
                            ts.push(t);
                        }
                    }
                    if level > 1.0 {
                        let extra = Poisson::new(lambda * (level - 1.0))
                            .map(|p| p.sample(&mut dyn_rng) as usize)
                            .unwrap_or(0);
                        for _ in 0..extra {
                            let t = d as f64 * day + (h as f64 + dyn_rng.gen::<f64>()) * 3600.0;
                            if (from..to).contains(&t) {
                                ts.push(t);
                            }
                        }
                    }
                }
            }
            if burst_rate > 0.0 {
                let bursts = Poisson::new(burst_rate)
                    .map(|p| p.sample(&mut dyn_rng) as usize)
                    .unwrap_or(0);
                for _ in 0..bursts {
                    let at = d as f64 * day + dyn_rng.gen::<f64>() * day;
                    let n = Poisson::new(dy.burst_postings.max(1e-9))
                        .map(|p| p.sample(&mut dyn_rng) as usize)
                        .unwrap_or(0);
                    for _ in 0..n {
                        let t = at + dyn_rng.gen::<f64>() * 3600.0;
                        if (from..to).contains(&t) && t < span {
                            ts.push(t);
                        }
                    }
                }
            }
        }
        truth.per_hour.push(hourly);
        ts.sort_by(f64::total_cmp);
        feeds.push(FeedRow {
            id: format!("f{f}"),
            weight: 1.0,
            host: (cfg.hosts > 0).then(|| format!("h{}", f % cfg.hosts)),
        });
        postings.push(ts);
    }
    let users: Vec<(String, f64)> = (0..cfg.users).map(|u| (format!("u{u}"), 1.0)).collect();
    let subscriptions: Vec<Vec<u32>> = (0..cfg.users)
        .map(|_| {
            let mut s: Vec<u32> = (0..cfg.subs_per_user.min(cfg.feeds))
                .map(|_| rng.gen_range(0..cfg.feeds as u32))
                .collect();
            s.sort_unstable();
            s.dedup();
            s
        })
        .collect();
    let mut accesses = Vec::new();
    let reader = |h: f64| {
        0.1 + (-((h - 8.0) / 1.0).powi(2) / 2.0).exp()
            + (-((h - 12.5) / 0.8).powi(2) / 2.0).exp()
            + 1.5 * (-((h - 20.0) / 1.5).powi(2) / 2.0).exp()
    };
    let peak = 2.0;
    for u in 0..cfg.users {
        let n = (cfg.accesses_per_user_per_day * cfg.days as f64) as usize;
        for _ in 0..n {
            // Rejection sampling of the reader's daily shape.
            let t = loop {
                let d = rng.gen_range(0..cfg.days) as f64;
                let h = rng.gen::<f64>() * 24.0;
                if rng.gen::<f64>() * peak < reader(h) {
                    break d * day + h * 3600.0;
                }
            };
            let feed = if rng.gen::<f64>() < 0.2 && !subscriptions[u].is_empty() {
                Some(subscriptions[u][rng.gen_range(0..subscriptions[u].len())])
            } else {
                None
            };
            accesses.push(Access {
                user: u as u32,
                feed,
                ts: t,
            });
        }
    }
    accesses.sort_by(|a, b| a.ts.total_cmp(&b.ts));
    let end_ts = cfg.days as f64 * day - 1.0;
    (
        Trace {
            feeds,
            postings,
            users,
            subscriptions,
            accesses,
            end_ts,
        },
        truth,
    )
}

/// File of a trace folder holding [`Truth`]: `feed_id,hour,rate` rows, hours counted from
/// the trace's start, zero rates left out.
pub const TRUTH_FILE: &str = "intensities.csv";

/// Writes `truth` beside a trace written by [`write()`].
pub fn write_truth(trace: &Trace, truth: &Truth, dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join(TRUTH_FILE))?);
    writeln!(w, "feed_id,hour,rate")?;
    for (f, hours) in truth.per_hour.iter().enumerate() {
        for (h, r) in hours.iter().enumerate() {
            if *r > 0.0 {
                writeln!(w, "{},{h},{r}", trace.feeds[f].id)?;
            }
        }
    }
    w.flush()
}

/// Reads the [`Truth`] of a trace folder, if it has one: `Ok(None)` without the file; an
/// error naming the line for a row that does not parse or names an unknown feed.
pub fn load_truth(dir: &std::path::Path, trace: &Trace) -> Result<Option<Truth>, String> {
    let path = dir.join(TRUTH_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let index: std::collections::HashMap<&str, usize> = trace
        .feeds
        .iter()
        .enumerate()
        .map(|(i, f)| (f.id.as_str(), i))
        .collect();
    let hours = ((trace.end_ts / 3600.0).ceil() as usize).max(1);
    let mut per_hour = vec![vec![0.0f32; hours]; trace.feeds.len()];
    for (n, line) in text.lines().enumerate().skip(1) {
        let bad = |why: &str| format!("{}:{}: {why}", path.display(), n + 1);
        let mut parts = line.split(',');
        let (Some(id), Some(h), Some(r), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected feed_id,hour,rate"));
        };
        let f = *index.get(id).ok_or_else(|| bad("unknown feed"))?;
        let h: usize = h.parse().map_err(|_| bad("bad hour"))?;
        let r: f32 = r.parse().map_err(|_| bad("bad rate"))?;
        if !(r.is_finite() && r >= 0.0) {
            return Err(bad("a rate must be a non-negative number"));
        }
        if h < hours {
            per_hour[f][h] = r;
        }
    }
    Ok(Some(Truth { per_hour }))
}

/// Writes `trace` as the CSV files of a trace folder (created if missing).
pub fn write(trace: &Trace, dir: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let file = |name: &str| -> std::io::Result<std::io::BufWriter<std::fs::File>> {
        Ok(std::io::BufWriter::new(std::fs::File::create(
            dir.join(name),
        )?))
    };
    let mut w = file("feeds.csv")?;
    writeln!(w, "feed_id,weight,host")?;
    for f in &trace.feeds {
        writeln!(
            w,
            "{},{},{}",
            f.id,
            f.weight,
            f.host.as_deref().unwrap_or("")
        )?;
    }
    w.flush()?;
    let mut w = file("postings.csv")?;
    writeln!(w, "feed_id,ts")?;
    // One time-ordered file, as the loader requires.
    let mut rows: Vec<(f64, usize)> = trace
        .postings
        .iter()
        .enumerate()
        .flat_map(|(f, posts)| posts.iter().map(move |&t| (t, f)))
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (t, f) in rows {
        writeln!(w, "{},{:.1}", trace.feeds[f].id, t)?;
    }
    w.flush()?;
    let mut w = file("users.csv")?;
    writeln!(w, "user_id,weight")?;
    for (u, wt) in &trace.users {
        writeln!(w, "{u},{wt}")?;
    }
    w.flush()?;
    let mut w = file("subscriptions.csv")?;
    writeln!(w, "user_id,feed_id")?;
    for (u, subs) in trace.subscriptions.iter().enumerate() {
        for &f in subs {
            writeln!(w, "{},{}", trace.users[u].0, trace.feeds[f as usize].id)?;
        }
    }
    w.flush()?;
    let mut w = file("accesses.csv")?;
    writeln!(w, "user_id,feed_id,ts")?;
    for a in &trace.accesses {
        let feed = a
            .feed
            .map(|f| trace.feeds[f as usize].id.as_str())
            .unwrap_or("");
        writeln!(w, "{},{},{:.1}", trace.users[a.user as usize].0, feed, a.ts)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_trace_loads_back_the_same() {
        let t = generate(&SynthConfig {
            feeds: 20,
            users: 5,
            days: 7,
            mean_posts_per_day: 3.0,
            subs_per_user: 4,
            accesses_per_user_per_day: 5.0,
            weekend_factor: 0.5,
            hosts: 4,
            seed: 3,
            dynamics: Default::default(),
        });
        let dir = std::env::temp_dir().join(format!("kairos-synth-{}", std::process::id()));
        write(&t, &dir).unwrap();
        let back = Trace::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(back.feeds.len(), 20);
        assert_eq!(back.feeds[5].host.as_deref(), Some("h1"));
        assert_eq!(
            back.postings.iter().map(Vec::len).sum::<usize>(),
            t.postings.iter().map(Vec::len).sum::<usize>()
        );
        assert_eq!(back.accesses.len(), t.accesses.len());
        assert_eq!(back.subscriptions, t.subscriptions);
        for (a, b) in t
            .postings
            .iter()
            .flatten()
            .zip(back.postings.iter().flatten())
        {
            assert!((a - b).abs() <= 0.05 + 1e-9);
        }
    }

    fn config(dynamics: Dynamics) -> SynthConfig {
        SynthConfig {
            feeds: 200,
            users: 5,
            days: 28,
            mean_posts_per_day: 3.0,
            subs_per_user: 4,
            accesses_per_user_per_day: 5.0,
            weekend_factor: 0.5,
            hosts: 0,
            seed: 9,
            dynamics,
        }
    }

    /// Postings drawn against the truth's expectation, over the whole population.
    fn drawn_and_expected(t: &Trace, truth: &Truth) -> (f64, f64) {
        let drawn = t.postings.iter().map(Vec::len).sum::<usize>() as f64;
        let expected: f64 = truth.per_hour.iter().flatten().map(|&r| r as f64).sum();
        (drawn, expected)
    }

    #[test]
    fn the_truth_is_what_the_postings_were_drawn_from() {
        // Without dynamics the trace is the one `generate` always made.
        let steady = config(Dynamics::default());
        let (t, truth) = generate_with_truth(&steady);
        assert_eq!(t.postings, generate(&steady).postings);
        assert_eq!(truth.per_hour.len(), 200);
        assert!(truth.per_hour.iter().all(|h| h.len() == 28 * 24));
        for dynamics in [
            Dynamics::default(),
            Dynamics {
                drift: 0.2,
                ..Default::default()
            },
            Dynamics {
                bursts_per_week: 2.0,
                burst_postings: 10.0,
                ..Default::default()
            },
            Dynamics {
                start_stop: 0.5,
                ..Default::default()
            },
            Dynamics {
                timer_share: 0.5,
                start_stop: 0.3,
                drift: 0.1,
                ..Default::default()
            },
        ] {
            let (t, truth) = generate_with_truth(&config(dynamics));
            let (drawn, expected) = drawn_and_expected(&t, &truth);
            // Tens of thousands of Poisson postings: within 3% of their expectation (a
            // truth off by a factor, or bursts left out of it, is far outside).
            assert!(
                (drawn / expected - 1.0).abs() < 0.03,
                "{dynamics:?}: drawn {drawn}, expected {expected}"
            );
            // Per feed: postings only in hours the truth says the feed can post in.
            for (f, posts) in t.postings.iter().enumerate() {
                for &p in posts {
                    let h = (p / 3600.0) as usize;
                    assert!(
                        truth.per_hour[f][h] > 0.0,
                        "{dynamics:?}: feed {f} hour {h}"
                    );
                }
            }
        }
        // Feeds that start or stop: some feeds are silent for a stretch of whole days.
        let (_, truth) = generate_with_truth(&config(Dynamics {
            start_stop: 0.5,
            ..Default::default()
        }));
        let dark = truth
            .per_hour
            .iter()
            .filter(|h| h.chunks(24).any(|d| d.iter().all(|&r| r == 0.0)))
            .count();
        assert!(
            (60..=140).contains(&dark),
            "{dark} of 200 feeds start or stop"
        );
    }

    #[test]
    fn a_timer_feed_posts_within_minutes_of_its_clock_time() {
        let (t, truth) = generate_with_truth(&config(Dynamics {
            timer_share: 0.5,
            ..Default::default()
        }));
        let mut timers = 0;
        for (f, posts) in t.postings.iter().enumerate() {
            // A timer feed's truth holds at most two hours of each day (its window may
            // cross an hour), the same two every day.
            let hours: std::collections::BTreeSet<usize> = truth.per_hour[f]
                .iter()
                .enumerate()
                .filter(|(_, &r)| r > 0.0)
                .map(|(i, _)| i % 24)
                .collect();
            if hours.len() > 2 {
                continue;
            }
            timers += 1;
            // Every posting within the jitter of the feed's first one, on the clock.
            let Some(&first) = posts.first() else {
                continue;
            };
            for &p in posts {
                let apart = (p - first).rem_euclid(86_400.0);
                let apart = apart.min(86_400.0 - apart);
                assert!(apart <= TIMER_JITTER_S, "feed {f}: {p} vs {first}");
            }
        }
        assert!((70..=130).contains(&timers), "{timers} of 200 on a timer");
        // Without the share no feed is on a timer: every feed posts over many hours.
        let (_, truth) = generate_with_truth(&config(Dynamics::default()));
        assert!(truth
            .per_hour
            .iter()
            .all(|h| h.iter().take(24).filter(|&&r| r > 0.0).count() > 2));
    }

    #[test]
    fn a_two_window_timer_feed_posts_near_both_of_its_clock_times() {
        let (t, truth) = generate_with_truth(&config(Dynamics {
            timer_share: 1.0,
            timer_windows: 2,
            ..Default::default()
        }));
        let mut both = 0;
        for (f, posts) in t.postings.iter().enumerate() {
            // Each posting lies within the jitter after a start of one of the feed's two
            // windows, and the truth's day holds at most four hours.
            let hours = truth.per_hour[f][..24].iter().filter(|&&r| r > 0.0).count();
            assert!((1..=4).contains(&hours), "feed {f}: {hours} hours");
            let mut clock: Vec<f64> = posts.iter().map(|p| p.rem_euclid(86_400.0)).collect();
            clock.sort_by(f64::total_cmp);
            // Postings more than two jitters apart on the clock fall in different windows.
            let groups = 1 + clock
                .windows(2)
                .filter(|w| w[1] - w[0] > 2.0 * TIMER_JITTER_S)
                .count()
                - usize::from(
                    clock.len() > 1
                        && clock[0] + 86_400.0 - clock[clock.len() - 1] <= 2.0 * TIMER_JITTER_S,
                );
            assert!(groups <= 2, "feed {f}: {groups} groups of clock times");
            if groups == 2 {
                both += 1;
            }
        }
        // Two random clock times land within twenty minutes of each other for about one
        // feed in 36; the rest post at both.
        assert!(both >= 150, "{both} of 200 feeds post at two times");
    }

    #[test]
    fn a_written_truth_loads_back_and_bad_rows_are_named() {
        let (t, truth) = generate_with_truth(&config(Dynamics {
            drift: 0.1,
            ..Default::default()
        }));
        let dir = std::env::temp_dir().join(format!("kairos-truth-{}", std::process::id()));
        write(&t, &dir).unwrap();
        assert_eq!(load_truth(&dir, &t).unwrap(), None, "no file, no truth");
        write_truth(&t, &truth, &dir).unwrap();
        let back = load_truth(&dir, &t).unwrap().unwrap();
        for (a, b) in truth
            .per_hour
            .iter()
            .flatten()
            .zip(back.per_hour.iter().flatten())
        {
            assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0));
        }
        assert_eq!(back.day(3, 2), truth.day(3, 2));
        for (row, why) in [
            ("nope,1,0.5", "unknown feed"),
            ("f1,x,0.5", "bad hour"),
            ("f1,2,-1", "non-negative"),
            ("f1,2,NaN", "non-negative"),
            ("f1,2", "expected"),
        ] {
            std::fs::write(dir.join(TRUTH_FILE), format!("feed_id,hour,rate\n{row}\n")).unwrap();
            let e = load_truth(&dir, &t).unwrap_err();
            assert!(e.contains(why) && e.contains(":2:"), "{row}: {e}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
