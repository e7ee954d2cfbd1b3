//! Pieces of the standalone demo that are worth testing on their own: the simulated
//! readers' access process and the uniform-polling baseline the summary compares against.

use kairos_coordinator::time::{DAY_MS, HOUR_MS};
use rand::Rng;
use rand_distr::{Distribution, Poisson};

/// Relative reading intensity by hour of day (UTC): a morning and an evening peak.
pub fn reading_shape(hour: usize) -> f64 {
    let h = hour as f64;
    let bump = |c: f64, w: f64| {
        let d = ((h - c + 12.0).rem_euclid(24.0)) - 12.0;
        (-(d / w).powi(2) / 2.0).exp()
    };
    0.1 + bump(8.0, 1.5) + 0.8 * bump(20.0, 2.0)
}

/// Access times of `users` readers in `(from_ms, to_ms]`, each reading `per_day` times a
/// day on average with the [`reading_shape`]: `(user index, time)` in time order.
pub fn reader_accesses(
    rng: &mut impl Rng,
    users: usize,
    per_day: f64,
    from_ms: i64,
    to_ms: i64,
) -> Vec<(usize, i64)> {
    let mut out = Vec::new();
    if to_ms <= from_ms || users == 0 {
        return out;
    }
    let norm: f64 = (0..24).map(reading_shape).sum::<f64>() / 24.0;
    // Walk hour boundaries so the intensity follows the time of day.
    let mut t = from_ms;
    while t < to_ms {
        let hour_end = (t.div_euclid(HOUR_MS) + 1) * HOUR_MS;
        let end = hour_end.min(to_ms);
        let hour = (t.rem_euclid(DAY_MS) / HOUR_MS) as usize;
        let lambda =
            per_day * reading_shape(hour) / norm * (end - t) as f64 / DAY_MS as f64 * users as f64;
        if let Ok(p) = Poisson::new(lambda) {
            for _ in 0..p.sample(rng) as usize {
                out.push((rng.gen_range(0..users), rng.gen_range(t + 1..=end)));
            }
        }
        t = end;
    }
    out.sort_by_key(|&(_, t)| t);
    out
}

/// Uniform polling of one feed: `per_day` evenly spaced fetches a day, shifted by a phase
/// in `[0, 1)` of the interval. Returns the first fetch at or after `t_ms`.
pub fn uniform_next_fetch(t_ms: i64, per_day: f64, phase: f64) -> i64 {
    let interval = DAY_MS as f64 / per_day;
    let offset = phase * interval;
    let k = ((t_ms as f64 - offset) / interval).ceil();
    (k * interval + offset).ceil() as i64
}

/// A deterministic phase in `[0, 1)` for feed `i`.
pub fn phase_of(i: usize) -> f64 {
    let x = (i as u64 ^ 0x2545_f491_4f6c_dd1d).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn uniform_fetches_are_evenly_spaced_and_delay_averages_half_an_interval() {
        let per_day = 4.0;
        let f = |t| uniform_next_fetch(t, per_day, 0.25);
        assert_eq!(f(0), 5_400_000, "a quarter of six hours");
        assert_eq!(f(5_400_000), 5_400_000);
        assert_eq!(f(5_400_001), 5_400_000 + 21_600_000);
        // Postings spread evenly wait half an interval on average: 3 h.
        let n = 10_000;
        let mean: f64 = (0..n)
            .map(|i| {
                let t = i * 86_400_000 / n;
                (f(t) - t) as f64
            })
            .sum::<f64>()
            / n as f64;
        assert!((mean / 3_600_000.0 - 3.0).abs() < 0.01, "{mean}");
    }

    #[test]
    fn readers_read_at_the_configured_rate_mostly_at_the_peaks() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let days = 20;
        let ev = reader_accesses(&mut rng, 50, 6.0, 0, days * DAY_MS);
        let per_user_day = ev.len() as f64 / 50.0 / days as f64;
        assert!((per_user_day - 6.0).abs() < 0.3, "{per_user_day}");
        assert!(ev.windows(2).all(|w| w[0].1 <= w[1].1));
        let at = |h: i64| {
            ev.iter()
                .filter(|(_, t)| t.rem_euclid(DAY_MS) / 3_600_000 == h)
                .count()
        };
        assert!(
            at(8) > 4 * at(2),
            "morning peak {} vs night {}",
            at(8),
            at(2)
        );
        // Split intervals give the same process.
        assert!(reader_accesses(&mut rng, 5, 6.0, 10, 10).is_empty());
    }
}
