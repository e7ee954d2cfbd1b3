//! The one clock all Kairos timing goes through: simulated Unix time that runs `scale`
//! times faster than the wall clock from a chosen origin (scale 1 = real time).
//!
//! Demos and tests compress a day into minutes with it; production uses scale 1 and the
//! current time as origin.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A possibly time-compressed clock.
#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    wall_origin: Instant,
    sim_origin_ms: i64,
    scale: f64,
    /// A virtual clock set by its owner (replays), instead of one that follows the wall.
    manual: Option<&'static AtomicI64>,
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
            manual: None,
        }
    }

    /// A virtual clock that reads `start_ms` until [`SimClock::set_ms`] moves it: replays
    /// drive the live code through simulated days as fast as it computes. (Each such clock
    /// keeps eight bytes for the life of the process.)
    pub fn manual(start_ms: i64) -> SimClock {
        let cell: &'static AtomicI64 = Box::leak(Box::new(AtomicI64::new(start_ms)));
        SimClock {
            wall_origin: Instant::now(),
            sim_origin_ms: start_ms,
            scale: 1.0,
            manual: Some(cell),
        }
    }

    /// Sets a manual clock (and every copy of it) to `ms`; it never goes back. Returns
    /// false on a wall-driven clock, which cannot be set.
    pub fn set_ms(&self, ms: i64) -> bool {
        match self.manual {
            Some(cell) => {
                cell.fetch_max(ms, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// A clock that reads `sim_at_anchor_ms` at the wall-clock instant `anchor_unix_ms`:
    /// processes given the same pair share one simulated time whenever they start.
    pub fn anchored(sim_at_anchor_ms: i64, anchor_unix_ms: i64, scale: f64) -> SimClock {
        let since = SimClock::real().now_ms() - anchor_unix_ms;
        SimClock::new(sim_at_anchor_ms + (since as f64 * scale) as i64, scale)
    }

    /// The clock the command-line options describe: `scale` times faster than real time,
    /// reading `start` (RFC 3339; default now) at wall instant `anchor_unix_ms` (default:
    /// now). Errors name the bad option.
    pub fn from_options(
        scale: f64,
        start: Option<&str>,
        anchor_unix_ms: Option<i64>,
    ) -> Result<SimClock, String> {
        if !(scale > 0.0 && scale.is_finite() && scale <= 1e6) {
            return Err("--time-scale must be a positive number up to 1000000".into());
        }
        let start = match start {
            Some(s) => chrono::DateTime::parse_from_rfc3339(s)
                .map_err(|e| format!("--clock-start `{s}` is not an RFC 3339 time: {e}"))?
                .timestamp_millis(),
            None => SimClock::real().now_ms(),
        };
        Ok(match anchor_unix_ms {
            Some(a) => SimClock::anchored(start, a, scale),
            None => SimClock::new(start, scale),
        })
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
        if let Some(cell) = self.manual {
            return cell.load(Ordering::SeqCst);
        }
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

    #[test]
    fn manual_clocks_move_only_when_set_and_never_back() {
        let c = SimClock::manual(1_000);
        let copy = c;
        assert_eq!(c.now_ms(), 1_000);
        assert!(c.set_ms(5_000));
        assert_eq!(copy.now_ms(), 5_000);
        c.set_ms(4_000);
        assert_eq!(c.now_ms(), 5_000);
        assert!(!SimClock::new(0, 1.0).set_ms(1));
    }

    #[test]
    fn anchored_clocks_started_apart_agree() {
        let anchor = SimClock::real().now_ms() - 1000;
        let a = SimClock::anchored(5_000_000, anchor, 100.0);
        std::thread::sleep(Duration::from_millis(50));
        let b = SimClock::anchored(5_000_000, anchor, 100.0);
        let (ta, tb) = (a.now_ms(), b.now_ms());
        // One wall second after the anchor: ~100 simulated seconds.
        assert!((ta - 5_100_000).abs() < 20_000, "{ta}");
        assert!((ta - tb).abs() < 1_000, "{ta} vs {tb}");
    }
}

/// The clock options every Kairos binary takes (`--time-scale`, `--clock-start`,
/// `--clock-anchor-unix-ms`), so a farm, workers and a coordinator started apart share one
/// compressed clock.
#[derive(clap::Args, Clone, Debug)]
pub struct ClockArgs {
    /// Run the clock this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Simulated instant the clock starts at (RFC 3339); default: now.
    #[arg(long)]
    pub clock_start: Option<String>,
    /// Wall-clock instant (Unix ms) at which the clock reads `--clock-start`.
    #[arg(long, requires = "clock_start")]
    pub clock_anchor_unix_ms: Option<i64>,
}

impl ClockArgs {
    /// The clock these options describe, or why they describe none.
    pub fn clock(&self) -> anyhow::Result<SimClock> {
        SimClock::from_options(
            self.time_scale,
            self.clock_start.as_deref(),
            self.clock_anchor_unix_ms,
        )
        .map_err(anyhow::Error::msg)
    }
}
