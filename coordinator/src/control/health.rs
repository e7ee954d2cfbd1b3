//! Whether a feed can be fetched, and what its publisher asked for: the per-feed failure
//! state (exponential back-off, `410 Gone`, malformed for days) and the server hints
//! (`Cache-Control: max-age`, RSS `<ttl>`, `sy:updatePeriod`, `skipHours`/`skipDays`), turned
//! into bounds on the feed's plan ([`Bounds`]).
//!
//! **Back-off works in the plan, not beside it.** After `k` failures in a row a feed may be
//! fetched at most once per `min(base·2^(k−1), max)`: its allocation is capped at that rate,
//! so the budget it cannot use goes to other feeds at the same replan, and the worker is told
//! not to fetch before the next allowed moment (the plan only changes at replans). Transient
//! errors on a feed fetched every few hours change nothing; a feed broken for a day falls to
//! about one probe a day and recovers on its first answer. The configured minimum gives way
//! to the back-off — a failing feed is not hammered to keep a floor.
//!
//! **Hints bound the rate from above and never below the floor**: a `<ttl>` of a day on a feed
//! whose floor is two fetches a day keeps the floor. A hint longer than `max_hint` (a day by
//! default) is read as `max_hint`, so a `<ttl>` of 10⁹ minutes cannot silence a feed.

use crate::plan::alloc::{floor_level, Level};
use crate::plan::planner::FeedModel;
use crate::time::{DAY_MS, HOUR_MS};
use serde::{Deserialize, Serialize};

/// What a feed's publisher told us, from its last answered fetch (seconds; 0 = none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hints {
    /// `Cache-Control: max-age`.
    pub max_age_s: u32,
    /// RSS `<ttl>`.
    pub ttl_s: u32,
    /// `sy:updatePeriod` / `sy:updateFrequency`.
    pub update_period_s: u32,
    /// `skipHours`: bit `h` = hour `h` UTC.
    pub skip_hours: u32,
    /// `skipDays`: bit 0 = Monday … bit 6 = Sunday.
    pub skip_days: u32,
}

/// A feed's fetch health.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Failed fetches in a row (reset by any answer).
    pub consecutive_failures: u32,
    /// The last failure, for operators.
    pub last_error: String,
    /// When the current run of failures ended its last fetch, Unix ms.
    pub last_failure_ms: Option<i64>,
    /// Start of the current run of malformed answers, Unix ms.
    pub malformed_since_ms: Option<i64>,
    /// When the server answered `410 Gone`: the feed is no longer planned.
    pub gone_since_ms: Option<i64>,
    /// The publisher's hints from the last answered fetch.
    pub hints: Hints,
}

super::cold::empty_is_default!(Health);

/// How a fetch ended, as far as health is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A document that parsed.
    Answered,
    /// 304 Not Modified: no document, so the document's hints stand; a `max-age` on the
    /// 304 itself replaces the earlier one.
    Unchanged,
    /// A document that did not parse.
    Malformed,
    /// 429 or 503: the host's business, not the feed's ([`super::hosts`]).
    Throttled,
    /// 410 Gone.
    Gone,
    /// Any other failure.
    Failed,
}

/// What one fetch changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// The feed answered after failing.
    pub recovered: bool,
    /// The feed started failing.
    pub started_failing: bool,
    /// The feed answered 410 for the first time.
    pub gone: bool,
}

/// Operator settings for failures and hints.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthPolicy {
    /// Whether publisher hints bound the plan at all.
    pub respect_hints: bool,
    /// Longest interval a hint may impose, ms.
    pub max_hint_ms: i64,
    /// Back-off after the first failure, ms.
    pub backoff_base_ms: i64,
    /// Longest back-off, ms.
    pub backoff_max_ms: i64,
    /// How long a feed must answer malformed documents to be flagged, ms.
    pub malformed_flag_ms: i64,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy {
            respect_hints: true,
            max_hint_ms: DAY_MS,
            backoff_base_ms: HOUR_MS,
            backoff_max_ms: DAY_MS,
            malformed_flag_ms: DAY_MS,
        }
    }
}

/// Upper bounds on a feed's plan beyond the budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bounds {
    /// Highest fetches per day, if bounded.
    pub max_per_day: Option<f64>,
    /// The bound comes from a failure back-off (the floor gives way) rather than a hint.
    pub from_backoff: bool,
    /// No fetch before this time, Unix ms.
    pub not_before_ms: Option<i64>,
    /// Readable reasons, one per active constraint.
    pub reasons: Vec<String>,
}

impl Bounds {
    fn cap(&mut self, per_day: f64) {
        self.max_per_day = Some(self.max_per_day.map_or(per_day, |m| m.min(per_day)));
    }
}

impl Health {
    /// Folds one fetch in. `hints` are taken only from answered fetches.
    pub fn record(
        &mut self,
        answer: Answer,
        finished_ms: i64,
        error: &str,
        hints: Hints,
    ) -> Change {
        let mut c = Change::default();
        match answer {
            Answer::Answered | Answer::Unchanged => {
                c.recovered = self.consecutive_failures > 0 || self.gone_since_ms.is_some();
                self.consecutive_failures = 0;
                self.last_failure_ms = None;
                self.malformed_since_ms = None;
                self.gone_since_ms = None;
                if answer == Answer::Answered {
                    self.hints = hints;
                } else if hints.max_age_s > 0 {
                    self.hints.max_age_s = hints.max_age_s;
                }
            }
            Answer::Throttled => {}
            Answer::Gone => {
                c.gone = self.gone_since_ms.is_none();
                self.gone_since_ms.get_or_insert(finished_ms);
                self.fail(finished_ms, error, &mut c);
            }
            Answer::Malformed => {
                self.malformed_since_ms.get_or_insert(finished_ms);
                self.fail(finished_ms, error, &mut c);
            }
            Answer::Failed => self.fail(finished_ms, error, &mut c),
        }
        c
    }

    fn fail(&mut self, at: i64, error: &str, c: &mut Change) {
        c.started_failing = self.consecutive_failures == 0;
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        self.last_failure_ms = Some(at);
        self.last_error = error.chars().take(200).collect();
    }

    /// Whether the feed answered 410 and is no longer planned.
    pub fn is_gone(&self) -> bool {
        self.gone_since_ms.is_some()
    }

    /// Whether the feed has answered only malformed documents for the flag's span.
    pub fn malformed_flagged(&self, now_ms: i64, p: &HealthPolicy) -> bool {
        self.malformed_since_ms
            .is_some_and(|s| now_ms - s >= p.malformed_flag_ms)
    }

    /// The status word shown to operators.
    pub fn status(&self, answered_once: bool, now_ms: i64, p: &HealthPolicy) -> &'static str {
        if self.is_gone() {
            "gone"
        } else if self.malformed_flagged(now_ms, p) {
            "malformed"
        } else if self.consecutive_failures > 0 {
            "failing"
        } else if answered_once {
            "ok"
        } else {
            "new"
        }
    }

    /// The current back-off interval, if failing.
    pub fn backoff_ms(&self, p: &HealthPolicy) -> Option<i64> {
        let k = self.consecutive_failures;
        if k == 0 {
            return None;
        }
        let doubled = p.backoff_base_ms.saturating_mul(1i64 << (k - 1).min(40));
        Some(doubled.min(p.backoff_max_ms).max(1))
    }

    /// The bounds health and hints put on the feed's plan.
    pub fn bounds(&self, p: &HealthPolicy) -> Bounds {
        let mut b = Bounds::default();
        if let (Some(interval), Some(last)) = (self.backoff_ms(p), self.last_failure_ms) {
            b.cap(DAY_MS as f64 / interval as f64);
            b.from_backoff = true;
            b.not_before_ms = Some(last + interval);
            b.reasons.push(format!(
                "back-off after {} failure{} ({}): at most one fetch per {}",
                self.consecutive_failures,
                if self.consecutive_failures == 1 {
                    ""
                } else {
                    "s"
                },
                self.last_error,
                human_ms(interval)
            ));
        }
        if !p.respect_hints {
            return b;
        }
        let h = &self.hints;
        for (name, secs) in [
            ("Cache-Control max-age", h.max_age_s),
            ("ttl", h.ttl_s),
            ("sy:updatePeriod", h.update_period_s),
        ] {
            if secs == 0 {
                continue;
            }
            let ms = (secs as i64 * 1000).min(p.max_hint_ms);
            let per_day = DAY_MS as f64 / ms as f64;
            if per_day < 1440.0 {
                b.cap(per_day);
                b.reasons.push(format!(
                    "{name} {}: at most one fetch per {}",
                    human_ms(secs as i64 * 1000),
                    human_ms(ms)
                ));
            }
        }
        if h.skip_hours & 0x00ff_ffff != 0 {
            b.reasons.push(format!(
                "skipHours {}",
                mask_list(h.skip_hours, 24, |i| i.to_string())
            ));
        }
        if h.skip_days & 0x7f != 0 {
            const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
            b.reasons.push(format!(
                "skipDays {}",
                mask_list(h.skip_days, 7, |i| DAYS[i].into())
            ));
        }
        b
    }

    /// The skip masks to hand to the worker (none when hints are ignored, or when they
    /// would leave no hour or no day to fetch in).
    pub fn skip_masks(&self, p: &HealthPolicy) -> (u32, u32) {
        if !p.respect_hints {
            return (0, 0);
        }
        let hours = self.hints.skip_hours & 0x00ff_ffff;
        let days = self.hints.skip_days & 0x7f;
        (
            if hours == 0x00ff_ffff { 0 } else { hours },
            if days == 0x7f { 0 } else { days },
        )
    }
}

/// Bounds each model's levels (same order as `bounds`; levels count per period of
/// `days_per_period` days): a hint lowers the maximum down to the floor and no further; a
/// back-off lowers the maximum and the floor with it. Returns the feeds whose maximum fell.
pub fn apply_bounds(models: &mut [FeedModel], bounds: &[Bounds], days_per_period: f64) -> usize {
    let mut bounded = 0;
    for (m, b) in models.iter_mut().zip(bounds) {
        let Some(per_day) = b.max_per_day else {
            continue;
        };
        let level = floor_level(per_day * days_per_period, Level::MIN / 4);
        if b.from_backoff {
            m.max_level = m.max_level.min(level);
            m.min_level = m.min_level.min(m.max_level);
        } else {
            m.max_level = m.max_level.min(level.max(m.min_level));
        }
        bounded += 1;
    }
    bounded
}

fn mask_list(mask: u32, n: usize, name: impl Fn(usize) -> String) -> String {
    (0..n)
        .filter(|&i| mask & (1 << i) != 0)
        .map(name)
        .collect::<Vec<_>>()
        .join(",")
}

/// `90 s`, `15 min`, `6 h`, `2 d`.
pub fn human_ms(ms: i64) -> String {
    let s = ms / 1000;
    if s < 120 {
        format!("{s} s")
    } else if s < 2 * 3600 {
        format!("{} min", s / 60)
    } else if s < 2 * 86_400 {
        format!("{:.0} h", s as f64 / 3600.0)
    } else {
        format!("{:.0} d", s as f64 / 86_400.0)
    }
}

/// Moves fetch offsets (seconds within a period that starts at midnight UTC) out of skipped
/// hours: each goes to the first allowed moment after it (wrapping past midnight), and
/// offsets that land together are merged. Empty masks and masks that skip every hour leave
/// the offsets as they are.
pub fn shift_out_of_skipped_hours(offsets: &[f64], skip_hours: u32, period_s: f64) -> Vec<f64> {
    let mask = skip_hours & 0x00ff_ffff;
    if mask == 0 || mask == 0x00ff_ffff {
        return offsets.to_vec();
    }
    let skipped = |t: f64| mask & (1 << (((t.rem_euclid(86_400.0)) / 3600.0) as u32 % 24)) != 0;
    let mut out: Vec<f64> = offsets
        .iter()
        .map(|&t| {
            let mut t = t;
            let mut steps = 0;
            while skipped(t) && steps < 24 {
                t = ((t / 3600.0).floor() + 1.0) * 3600.0;
                steps += 1;
            }
            t.rem_euclid(period_s)
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out.dedup_by(|a, b| (*a - *b).abs() < 1.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> HealthPolicy {
        HealthPolicy::default()
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_an_answer_resets_it() {
        let mut h = Health::default();
        assert_eq!(h.backoff_ms(&p()), None);
        assert_eq!(h.bounds(&p()), Bounds::default());
        let c = h.record(Answer::Failed, 1_000, "500", Hints::default());
        assert!(c.started_failing);
        assert_eq!(h.backoff_ms(&p()), Some(HOUR_MS));
        let b = h.bounds(&p());
        assert_eq!(b.max_per_day, Some(24.0));
        assert_eq!(b.not_before_ms, Some(1_000 + HOUR_MS));
        assert!(b.from_backoff);
        for i in 2..=4 {
            assert!(
                !h.record(Answer::Failed, i * 1_000, "500", Hints::default())
                    .started_failing
            );
        }
        assert_eq!(h.backoff_ms(&p()), Some(8 * HOUR_MS));
        assert_eq!(h.bounds(&p()).max_per_day, Some(3.0));
        for i in 5..100 {
            h.record(Answer::Failed, i * 1_000, "timeout", Hints::default());
        }
        assert_eq!(
            h.backoff_ms(&p()),
            Some(DAY_MS),
            "capped, and no overflow at 99"
        );
        assert_eq!(h.status(true, 0, &p()), "failing");
        let c = h.record(Answer::Answered, 200_000, "", Hints::default());
        assert!(c.recovered);
        assert_eq!(h.backoff_ms(&p()), None);
        assert_eq!(h.status(true, 0, &p()), "ok");
    }

    #[test]
    fn throttling_is_not_a_feed_failure_and_gone_is_sticky_until_an_answer() {
        let mut h = Health::default();
        h.record(Answer::Throttled, 1, "429", Hints::default());
        assert_eq!(h.consecutive_failures, 0);
        assert!(h.record(Answer::Gone, 2, "410", Hints::default()).gone);
        assert!(
            !h.record(Answer::Gone, 3, "410", Hints::default()).gone,
            "counted once"
        );
        assert!(h.is_gone());
        assert_eq!(h.status(true, 3, &p()), "gone");
        h.record(Answer::Answered, 4, "", Hints::default());
        assert!(!h.is_gone());
    }

    #[test]
    fn malformed_for_a_day_is_flagged() {
        let mut h = Health::default();
        h.record(Answer::Malformed, 0, "not a feed", Hints::default());
        h.record(Answer::Failed, HOUR_MS, "timeout", Hints::default());
        assert!(!h.malformed_flagged(DAY_MS - 1, &p()));
        assert!(h.malformed_flagged(DAY_MS, &p()));
        assert_eq!(h.status(true, DAY_MS, &p()), "malformed");
        h.record(Answer::Answered, DAY_MS + 1, "", Hints::default());
        assert!(!h.malformed_flagged(2 * DAY_MS, &p()));
    }

    #[test]
    fn hints_bound_the_rate_clamped_and_can_be_ignored() {
        let mut h = Health::default();
        let hints = Hints {
            max_age_s: 600,
            ttl_s: 3 * 3600,
            update_period_s: 0,
            skip_hours: 0b111,
            skip_days: 1 << 6,
        };
        h.record(Answer::Answered, 0, "", hints.clone());
        // A 304 has no document: its hints stand.
        h.record(Answer::Unchanged, 1, "", Hints::default());
        assert_eq!(h.hints, hints);
        let b = h.bounds(&p());
        assert_eq!(b.max_per_day, Some(8.0), "the longest hint wins: 3 h");
        assert!(!b.from_backoff);
        assert_eq!(b.not_before_ms, None);
        assert_eq!(b.reasons.len(), 4, "{:?}", b.reasons);
        assert!(b.reasons.iter().any(|r| r == "skipHours 0,1,2"));
        assert!(b.reasons.iter().any(|r| r == "skipDays Sun"));
        // A ttl of 10^9 minutes is read as the one-day clamp.
        h.hints.ttl_s = u32::MAX;
        assert_eq!(h.bounds(&p()).max_per_day, Some(1.0));
        // Hints off: nothing bounds the feed.
        let off = HealthPolicy {
            respect_hints: false,
            ..p()
        };
        assert_eq!(h.bounds(&off).max_per_day, None);
        assert_eq!(h.skip_masks(&off), (0, 0));
        // A mask that skips everything is ignored.
        h.hints.skip_hours = 0x00ff_ffff;
        assert_eq!(h.skip_masks(&p()), (0, 1 << 6));
    }

    #[test]
    fn hints_keep_the_floor_and_a_backoff_lowers_it() {
        let model = |min, max| FeedModel {
            weight: 1.0,
            post_bins: vec![1.0; 24],
            peaks: Vec::new(),
            access_bins: vec![],
            min_level: min,
            max_level: max,
            host: None,
            document: None,
        };
        let mut models = vec![
            model(2, 1440),
            model(2, 1440),
            model(2, 1440),
            model(2, 1440),
        ];
        let hint = |d: f64| Bounds {
            max_per_day: Some(d),
            ..Bounds::default()
        };
        let backoff = Bounds {
            from_backoff: true,
            ..hint(1.0 / 3.0)
        };
        let n = apply_bounds(
            &mut models,
            &[hint(6.0), hint(0.5), backoff, Bounds::default()],
            1.0,
        );
        assert_eq!(n, 3);
        assert_eq!((models[0].min_level, models[0].max_level), (2, 6));
        assert_eq!(
            (models[1].min_level, models[1].max_level),
            (2, 2),
            "the floor holds"
        );
        // Once every three days: level 2 − 3 = −1.
        assert_eq!((models[2].min_level, models[2].max_level), (-1, -1));
        assert_eq!((models[3].min_level, models[3].max_level), (2, 1440));
        // On a weekly plan a ttl of 6 h allows 28 a week.
        let mut week = vec![model(1, 10_080)];
        apply_bounds(&mut week, &[hint(4.0)], 7.0);
        assert_eq!(week[0].max_level, 28);
    }

    #[test]
    fn offsets_leave_skipped_hours() {
        // Skip 00:00–02:59 and 23:00–23:59.
        let mask = 0b111 | 1 << 23;
        let got = shift_out_of_skipped_hours(&[1800.0, 7200.0, 12_000.0, 83_000.0], mask, 86_400.0);
        assert_eq!(
            got,
            vec![10_800.0, 12_000.0],
            "three moved to 03:00 and merged"
        );
        // A two-day period keeps the second day's offsets on that day.
        let got = shift_out_of_skipped_hours(&[86_400.0 + 1800.0], mask, 172_800.0);
        assert_eq!(got, vec![86_400.0 + 10_800.0]);
        assert_eq!(shift_out_of_skipped_hours(&[5.0], 0, 86_400.0), vec![5.0]);
    }
}
