//! The one clock all Kairos timing goes through: simulated Unix time that runs `scale`
//! times faster than the wall clock from a chosen origin (scale 1 = real time).
//!
//! Demos and tests compress a day into minutes with it; production uses scale 1 and the
//! current time as origin.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A possibly time-compressed clock.
#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    wall_origin: Instant,
    sim_origin_ms: i64,
    scale: f64,
}

impl SimClock {
    /// Simulated time `sim_origin_ms` (Unix ms) now, advancing `scale`× faster than real time.
    pub fn new(sim_origin_ms: i64, scale: f64) -> SimClock {
        assert!(
            scale > 0.0 && scale.is_finite(),
            "clock scale must be positive"
        );
        SimClock {
            wall_origin: Instant::now(),
            sim_origin_ms,
            scale,
        }
    }

    /// Real time.
    pub fn real() -> SimClock {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        SimClock::new(now, 1.0)
    }

    /// Current simulated time, Unix ms.
    pub fn now_ms(&self) -> i64 {
        self.sim_origin_ms + (self.wall_origin.elapsed().as_secs_f64() * 1000.0 * self.scale) as i64
    }

    /// Wall-clock time until simulated instant `sim_ms` (zero if it has passed).
    pub fn wall_until(&self, sim_ms: i64) -> Duration {
        let ahead = (sim_ms - self.now_ms()).max(0) as f64 / self.scale;
        Duration::from_secs_f64(ahead / 1000.0)
    }

    /// Speed-up factor.
    pub fn scale(&self) -> f64 {
        self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_time_runs_faster_and_converts_back() {
        let c = SimClock::new(1_000_000, 1440.0); // a day per minute
        assert!(c.now_ms() >= 1_000_000);
        let target = c.now_ms() + 86_400_000;
        let wall = c.wall_until(target);
        assert!(
            wall <= Duration::from_secs(60) && wall > Duration::from_secs(59),
            "{wall:?}"
        );
        assert_eq!(c.wall_until(0), Duration::ZERO);
    }
}
