//! One feed's assigned fetch times: `origin + offset_i + k·period`, and the walk over them
//! the worker's schedule ([`crate::schedule`]) queues each next fetch by.

/// One feed's assigned schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedTimes {
    /// Feed id.
    pub feed_id: String,
    /// Politeness group.
    pub host: String,
    /// Offsets within the period, ms, each in `[0, period_ms)`.
    pub offsets_ms: Vec<i64>,
    /// Period, ms (> 0).
    pub period_ms: i64,
    /// Start of period 0, Unix ms.
    pub origin_ms: i64,
    /// The feed posts at fixed clock times (a timer window) and its plan's times sit just
    /// after them: the end-of-day sweep does not move them earlier, which would put a fetch
    /// before the window every day (a nightly job's window at 00:30 fetched at 23:35).
    pub timed: bool,
}

impl FeedTimes {
    /// The same schedule, marked as a timer feed's ([`FeedTimes::timed`]) or not.
    pub fn with_timed(mut self, timed: bool) -> FeedTimes {
        self.timed = timed;
        self
    }

    /// A schedule from the plan's units: offsets and period in seconds.
    pub fn from_seconds(
        feed_id: &str,
        host: &str,
        offsets_seconds: &[f64],
        period_seconds: f64,
        origin_ms: i64,
    ) -> FeedTimes {
        FeedTimes {
            feed_id: feed_id.to_string(),
            host: host.to_string(),
            offsets_ms: offsets_seconds
                .iter()
                .map(|s| (s * 1000.0).round() as i64)
                .collect(),
            period_ms: (period_seconds * 1000.0).round() as i64,
            origin_ms,
            timed: false,
        }
    }

    /// The offsets within one period, sorted, and where `t` falls: the start of its period
    /// and its phase in it.
    fn locate(&self, t: i64) -> (Vec<i64>, i64, i64) {
        let mut offsets: Vec<i64> = self
            .offsets_ms
            .iter()
            .map(|o| o.rem_euclid(self.period_ms))
            .collect();
        offsets.sort_unstable();
        let rel = t - self.origin_ms;
        let base = self.origin_ms + rel.div_euclid(self.period_ms) * self.period_ms;
        (offsets, base, rel.rem_euclid(self.period_ms))
    }

    /// First fetch time strictly after `t`, or `None` if the feed has no offsets.
    pub fn next_after(&self, t: i64) -> Option<i64> {
        let (offsets, base, phase) = self.locate(t);
        let first = *offsets.first()?;
        Some(match offsets.iter().find(|&&o| o > phase) {
            Some(&o) => base + o,
            None => base + self.period_ms + first,
        })
    }

    /// The plan's spacing ending at its time `t`: `t` less the time before it (0 without
    /// offsets).
    pub(crate) fn gap_to(&self, t: i64) -> i64 {
        self.prev_before(t).map_or(0, |p| t - p)
    }

    /// Last fetch time strictly before `t`, or `None` if the feed has no offsets.
    pub fn prev_before(&self, t: i64) -> Option<i64> {
        let (offsets, base, phase) = self.locate(t);
        let last = *offsets.last()?;
        Some(match offsets.iter().rev().find(|&&o| o < phase) {
            Some(&o) => base + o,
            None => base - self.period_ms + last,
        })
    }
}
