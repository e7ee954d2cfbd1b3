//! How well a WebSub hub delivers ([`HubRecord`]): what its pushes saw first against what
//! its feeds' polls found first, decaying with time, and whether it has fallen silent. The
//! plan polls a hub's feeds for the share it misses (`hub::push`).

/// How well a hub delivers, measured on its feeds' new postings: each was first seen
/// either pushed or polled (a poll finding a posting first, while the feed's subscription
/// was delivering, is one the hub missed or was late with). Both counts decay with
/// [`crate::control::push::PushPolicy::reliability_half_life_ms`] (a day), so old credit
/// fades; a hub that goes silent is caught sooner by [`HubRecord::silent`], and its feeds go
/// back to full polling at the next round.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HubRecord {
    /// Postings first seen pushed, decayed to `at_ms`.
    pub pushed: f64,
    /// Postings first seen polled while the hub should have delivered, decayed to `at_ms`.
    pub polled: f64,
    /// When the decayed counts were last brought up to date.
    pub at_ms: i64,
    /// Postings first seen pushed and polled, all time.
    pub pushed_total: u64,
    pub polled_total: u64,
    /// Deliveries taken, and the last one's time.
    pub deliveries: u64,
    pub last_delivery_ms: Option<i64>,
    /// The last time a poll found a posting first while the hub should have delivered it.
    #[serde(default)]
    pub last_missed_ms: Option<i64>,
    /// Requests to it that failed or were denied, all time.
    pub failures: u64,
}

/// Pseudo-counts of the reliability before anything is measured: one posting each way,
/// so a hub nobody has watched yet saves half of a feed's polling, and a few postings
/// either way move it.
const PRIOR_PUSHED: f64 = 1.0;
const PRIOR_POLLED: f64 = 1.0;

/// A hub whose last delivery is this much older than a posting a poll found first has gone
/// silent ([`HubRecord::silent`]): its feeds are polled in full until it delivers again.
pub const SILENCE_AFTER_MS: i64 = 3_600_000;

/// A posting a poll finds within this of its publication date is not counted against the
/// hub: its delivery may still be on the way.
pub const DELIVERY_GRACE_MS: i64 = 10 * 60_000;

/// The lowest miss share a plan uses (the polls stay a check: at 1/400 of a feed's rate,
/// polls spend about 1/20 of what the feed had, since a plan's fetches grow with the square
/// root of the rate).
pub const MIN_MISS_SHARE: f64 = 1.0 / 400.0;

impl HubRecord {
    fn decay(&mut self, now_ms: i64, half_life_ms: i64) {
        if now_ms > self.at_ms && half_life_ms > 0 {
            let f = 0.5f64.powf((now_ms - self.at_ms) as f64 / half_life_ms as f64);
            self.pushed *= f;
            self.polled *= f;
        }
        self.at_ms = self.at_ms.max(now_ms);
    }

    /// `n` new postings first seen by a delivery at `now_ms`.
    pub fn saw_pushed(&mut self, n: usize, now_ms: i64, half_life_ms: i64) {
        self.decay(now_ms, half_life_ms);
        self.pushed += n as f64;
        self.pushed_total += n as u64;
        self.deliveries += 1;
        self.last_delivery_ms = Some(self.last_delivery_ms.unwrap_or(now_ms).max(now_ms));
    }

    /// `n` new postings first seen by a poll at `now_ms` while the hub should have
    /// delivered them.
    pub fn saw_polled(&mut self, n: usize, now_ms: i64, half_life_ms: i64) {
        self.decay(now_ms, half_life_ms);
        self.polled += n as f64;
        self.polled_total += n as u64;
        if n > 0 {
            self.last_missed_ms = Some(self.last_missed_ms.unwrap_or(now_ms).max(now_ms));
        }
    }

    /// Whether the hub has gone silent: a poll found a posting first more than
    /// [`SILENCE_AFTER_MS`] after the hub's last delivery (a hub that delivers again is
    /// not silent any more).
    pub fn silent(&self) -> bool {
        match (self.last_missed_ms, self.last_delivery_ms) {
            (Some(missed), Some(delivered)) => missed > delivered + SILENCE_AFTER_MS,
            (Some(_), None) => self.polled >= 1.0,
            (None, _) => false,
        }
    }

    /// The share of a pushed feed's postings the hub is expected to miss (what its polls
    /// must still find), at `now_ms`: in [`MIN_MISS_SHARE`, 1].
    pub fn miss_share(&self, now_ms: i64, half_life_ms: i64) -> f64 {
        if self.silent() {
            return 1.0;
        }
        let mut r = self.clone();
        r.decay(now_ms, half_life_ms);
        let share = (r.polled + PRIOR_POLLED) / (r.pushed + r.polled + PRIOR_PUSHED + PRIOR_POLLED);
        share.clamp(MIN_MISS_SHARE, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::push::PushPolicy;

    const H: i64 = 3_600_000;

    #[test]
    fn a_hub_earns_credit_by_pushing_first_and_loses_it_when_it_falls_silent() {
        let half = PushPolicy::default().reliability_half_life_ms;
        let mut r = HubRecord::default();
        assert_eq!(r.miss_share(0, half), 0.5, "unmeasured: the prior's half");
        // A day of deliveries, 10 postings an hour, one posting an hour found by a poll
        // first (late deliveries).
        for h in 0..24 {
            r.saw_pushed(10, h * H, half);
            r.saw_polled(1, h * H + 1, half);
        }
        let share = r.miss_share(24 * H, half);
        assert!(
            (share - 1.0 / 11.0).abs() < 0.01,
            "about one in eleven missed: {share}"
        );
        assert_eq!(
            (r.pushed_total, r.polled_total, r.deliveries),
            (240, 24, 24)
        );
        assert!(!r.silent(), "misses right after deliveries are not silence");
        // Silence: a poll finds postings first two hours after the last delivery.
        r.saw_polled(3, 25 * H + 1, half);
        assert!(r.silent());
        assert_eq!(
            r.miss_share(25 * H + 1, half),
            1.0,
            "polled in full at once"
        );
        // It delivers again: its measured share is back.
        r.saw_pushed(1, 26 * H, half);
        assert!(!r.silent());
        assert!(r.miss_share(26 * H, half) < 0.2);
        // A perfect hub is bounded below: its polls stay a check.
        let mut perfect = HubRecord::default();
        perfect.saw_pushed(100_000, 0, half);
        assert_eq!(perfect.miss_share(0, half), MIN_MISS_SHARE);
        // Time alone (no polls, no pushes) moves the share back toward the prior's half.
        let later = perfect.miss_share(60 * 24 * H, half);
        assert!((later - 0.5).abs() < 0.01, "{later}");
        // A hub that never delivered and whose feeds' polls find postings: silent.
        let mut never = HubRecord::default();
        never.saw_polled(2, H, half);
        assert!(never.silent());
    }
}
