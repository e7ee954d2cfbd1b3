//! Synthetic traces for benchmarks and tests: heavy-tailed posting rates, diurnal shapes
//! from a dozen templates with random shifts, weekends at a chosen share of the weekday
//! rate, and readers with morning, lunch and evening peaks. Deterministic for a seed. Not
//! tuned to any sample trace. [`write`] stores a trace in the CSV format [`Trace::load`]
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
    let mut rng = StdRng::seed_from_u64(cfg.seed);
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
        for d in 0..cfg.days {
            let weekend = if d % 7 >= 5 { cfg.weekend_factor } else { 1.0 };
            for (h, w) in weights.iter().enumerate() {
                let lambda = rate * weekend * w / sum;
                if lambda <= 0.0 {
                    continue;
                }
                let k = Poisson::new(lambda)
                    .map(|p| p.sample(&mut rng) as usize)
                    .unwrap_or(0);
                for _ in 0..k {
                    ts.push(d as f64 * day + (h as f64 + rng.gen::<f64>()) * 3600.0);
                }
            }
        }
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
    Trace {
        feeds,
        postings,
        users,
        subscriptions,
        accesses,
        end_ts,
    }
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
}
