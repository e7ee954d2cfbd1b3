//! The plans' track record: how the delay the models promised compares with the delay the
//! fetches delivered, so the promise the coordinator reports can be recalibrated.
//!
//! A plan's expected delay per posting is computed under the very rates it was optimised
//! for. Where postings come in bursts at random hours, the learned hours are peakier than
//! the process that makes them (a burst's hour looks busy for days after), and the plan's
//! own figure is too good: on the synthetic `bursts` variant at 4 fetches a day the plans
//! realized 1.30× their promise on every scored day, on `mixed` 1.20×, while steady feeds
//! were within a few percent. Flattening the hours the plan is made from fixes that figure
//! but costs delay on real feeds (docs/EXPERIMENTS.md). So the plans stay as they are, and the
//! promise is scaled by the ratio of delivered to promised delay over the recent past: the
//! postings found by polls, each counted at its realized delay and at its feed's promise
//! under the plan in force when the report came, both decayed with a half-life of
//! [`HALF_LIFE_MS`] and shrunk toward 1 by how many fetches found them ([`PRIOR_DRAWS`]).
//! This is a forecaster's bias correction from its own record, not a change of the model;
//! the model's own figure stays visible beside it (`model_expected_delay_seconds`).

/// Half-life of the record (ms): three days. A week lagged the learner as it settled after
/// a cold start (the first days' plans miss by more), and over-corrected the scored days:
/// live `replay`, days 14 on, delivered over recalibrated promise 0.940 on `bursts` and
/// 0.943–0.968 on `real-commits` with a week, 0.965 and 0.970–0.985 with three days, both
/// before the shrinking; 0.972 and 0.954–0.988 with it (docs/EXPERIMENTS.md, 2026-11-29).
pub const HALF_LIFE_MS: f64 = 3.0 * 86_400_000.0;

/// Postings (decayed) the record needs before its ratio replaces 1.
pub const MIN_POSTINGS: f64 = 50.0;

/// Independent draws (fetches that found postings, decayed) at which the record's ratio
/// and the model's 1 weigh the same. A day's postings come from a few fetches on a
/// population of bursty feeds (`real-commits`: 30–120 a day), and a ratio from a few
/// hundred of them still moves by a tenth from one burst; on a population of hundreds of
/// busy feeds (thousands a day) the record speaks for itself.
pub const PRIOR_DRAWS: f64 = 100.0;

/// The ratio is held within these bounds: a record that says the model is off by more than
/// four times is a broken input or a broken model, shown by the gauge at the bound rather
/// than trusted.
pub const RATIO_BOUNDS: (f64, f64) = (0.25, 4.0);

/// Decayed sums of delivered and promised delay over the postings polls found. Kept with
/// the stored plan, so a new leader goes on from its predecessor's record.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PromiseRecord {
    delivered_s: f64,
    promised_s: f64,
    postings: f64,
    draws: f64,
    at_ms: Option<i64>,
}

impl PromiseRecord {
    /// Counts postings one fetch found at `now_ms` with these realized delays (ms), each
    /// promised `promised_s` seconds by its feed's plan in force: one independent draw. A
    /// promise that is not finite and positive (a feed not planned) counts nothing.
    pub fn add(&mut self, now_ms: i64, delays_ms: &[i64], promised_s: f64) {
        if delays_ms.is_empty() || !(promised_s.is_finite() && promised_s > 0.0) {
            return;
        }
        self.decay_to(now_ms);
        for &d in delays_ms {
            self.delivered_s += d.max(0) as f64 / 1000.0;
            self.promised_s += promised_s;
            self.postings += 1.0;
        }
        self.draws += 1.0;
    }

    /// Delivered over promised delay, shrunk toward 1 by the record's independent draws
    /// against [`PRIOR_DRAWS`], within [`RATIO_BOUNDS`]; 1 until [`MIN_POSTINGS`].
    pub fn ratio(&self) -> f64 {
        if self.postings < MIN_POSTINGS || self.promised_s <= 0.0 {
            return 1.0;
        }
        let raw = self.delivered_s / self.promised_s;
        let trust = self.draws / (self.draws + PRIOR_DRAWS);
        let ratio = 1.0 + trust * (raw - 1.0);
        if ratio.is_nan() {
            return 1.0; // Only a record no `add` could make; `checked` refuses those.
        }
        ratio.clamp(RATIO_BOUNDS.0, RATIO_BOUNDS.1)
    }

    /// The record as read back from the store, if `add` could have made it by `now_ms`:
    /// every sum finite and not negative, and not stamped more than a day ahead (a clock
    /// that far off, or an edited value, would otherwise stop its decay for good).
    pub fn checked(self, now_ms: i64) -> Option<Self> {
        let sums = [self.delivered_s, self.promised_s, self.postings, self.draws];
        let sane = sums.iter().all(|x| x.is_finite() && *x >= 0.0)
            && self
                .at_ms
                .is_none_or(|at| at <= now_ms.saturating_add(86_400_000));
        sane.then_some(self)
    }

    /// Postings in the record, decayed to its last addition.
    pub fn postings(&self) -> f64 {
        self.postings
    }

    fn decay_to(&mut self, now_ms: i64) {
        if let Some(at) = self.at_ms {
            // A clock that stepped back decays nothing rather than inflating the record.
            let k = 0.5f64.powf((now_ms - at).max(0) as f64 / HALF_LIFE_MS);
            self.delivered_s *= k;
            self.promised_s *= k;
            self.postings *= k;
            self.draws *= k;
        }
        self.at_ms = Some(self.at_ms.map_or(now_ms, |at| at.max(now_ms)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    /// `draws` fetches at `at`, each finding `per` postings delivered at `delay_ms` against
    /// a promise of 600 s.
    fn found(r: &mut PromiseRecord, at: i64, draws: usize, per: usize, delay_ms: i64) {
        for _ in 0..draws {
            r.add(at, &vec![delay_ms; per], 600.0);
        }
    }

    #[test]
    fn the_ratio_waits_for_evidence_then_trusts_it_by_its_draws() {
        let mut r = PromiseRecord::default();
        // 40 postings at twice their promise: not enough to speak.
        found(&mut r, 0, 4, 10, 1_200_000);
        assert_eq!(r.ratio(), 1.0);
        // 60 postings from 5 fetches: twice the promise, trusted 5 / (5 + 100).
        found(&mut r, 0, 1, 20, 1_200_000);
        assert!(
            (r.ratio() - (1.0 + 5.0 / 105.0)).abs() < 1e-12,
            "{}",
            r.ratio()
        );
        // A thousand fetches say it: 1 + 1000 / 1100.
        found(&mut r, 0, 995, 1, 1_200_000);
        assert!(
            (r.ratio() - (1.0 + 1000.0 / 1100.0)).abs() < 1e-12,
            "{}",
            r.ratio()
        );
        // Unplanned feeds and empty reports count nothing.
        r.add(0, &[9_000_000], f64::NAN);
        r.add(0, &[], 600.0);
        assert!((r.postings() - 1055.0).abs() < 1e-9);
    }

    #[test]
    fn old_evidence_fades_with_the_half_life() {
        let mut r = PromiseRecord::default();
        // Twice the promise, then on it one half-life later: the first part weighs half.
        let later = HALF_LIFE_MS as i64;
        found(&mut r, 0, 100, 1, 1_200_000);
        found(&mut r, later, 100, 1, 600_000);
        // Raw (0.5·100·1200 + 100·600) / (0.5·100·600 + 100·600) = 4/3, from 150 draws.
        let want = 1.0 + 150.0 / 250.0 * (4.0 / 3.0 - 1.0);
        assert!((r.ratio() - want).abs() < 1e-9, "{}", r.ratio());
        assert!((r.postings() - 150.0).abs() < 1e-9);
        // A report stamped earlier than the record decays nothing.
        found(&mut r, later - DAY, 50, 1, 600_000);
        assert!((r.postings() - 200.0).abs() < 1e-9);
    }

    #[test]
    fn a_stored_record_that_add_could_not_make_is_refused() {
        let mut good = PromiseRecord::default();
        found(&mut good, 10 * DAY, 100, 1, 900_000);
        assert_eq!(good.checked(10 * DAY), Some(good));
        let edit = |f: &dyn Fn(&mut PromiseRecord)| {
            let mut r = good;
            f(&mut r);
            r.checked(10 * DAY)
        };
        assert_eq!(edit(&|r| r.delivered_s = f64::NAN), None);
        assert_eq!(edit(&|r| r.promised_s = f64::INFINITY), None);
        assert_eq!(edit(&|r| r.draws = -100.0), None);
        assert_eq!(edit(&|r| r.at_ms = Some(i64::MAX)), None);
        // Huge but finite sums are kept; their ratio is held at its bounds, never NaN.
        let huge = edit(&|r| {
            r.delivered_s = 1e308;
            r.promised_s = 1e-300;
        })
        .unwrap();
        assert_eq!(huge.ratio(), RATIO_BOUNDS.1);
        let nan = PromiseRecord {
            delivered_s: f64::NAN,
            ..good
        };
        assert_eq!(nan.ratio(), 1.0);
    }

    #[test]
    fn a_wild_record_is_held_at_its_bounds() {
        let mut r = PromiseRecord::default();
        found(&mut r, 0, 100_000, 1, 100 * 600_000);
        assert_eq!(r.ratio(), RATIO_BOUNDS.1);
        let mut r = PromiseRecord::default();
        found(&mut r, 0, 1_000, 1, 1_000);
        assert_eq!(r.ratio(), RATIO_BOUNDS.0);
    }
}
