//! Planner settings as operators change them at run time: the one stored form, the one
//! patch, and the one error.
//!
//! **Precedence.** A coordinator starts from its command line (`serve`'s planner flags).
//! Settings an operator changed through the Admin API (`kairosctl settings set`) are
//! stored (`settings` key) and win over the command line from then on, on every replica
//! and after every restart; a replica whose flags differ says so once at start. Only the
//! fields of [`SettingsRecord`] are run-time settings; the learning parameters (window,
//! shrinkage, mixture, ...) and the replan interval stay the command line's.
//!
//! **The path of a change.** The Admin API's `SettingsPatch` carries only the fields that
//! change, the budget as one of a total or a per-feed figure; it becomes a
//! [`SettingsPatch`], is applied to the settings in force ([`SettingsPatch::apply`], which
//! validates the result once), checked against the feeds registered (a total below their
//! minimums would fail every round), stored as a [`SettingsRecord`], and installed; the
//! next round plans with it. Errors are [`SettingsError`]s, mapped to gRPC codes with the
//! others in `api`.

use crate::control::relearn::{Budget, PlannerSettings};

/// The run-time settings as stored (and as read back at start).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SettingsRecord {
    /// Budget, fetches per day across all feeds (when `per_feed` is false) or per feed.
    pub budget: f64,
    /// Whether `budget` is per feed.
    pub per_feed: bool,
    /// Metric name.
    pub metric: String,
    /// Policy name.
    pub policy: String,
    /// Minimum fetches per feed per day.
    pub min_fetches_per_day: f64,
    /// Maximum fetches per feed per day (0 = none).
    pub max_fetches_per_day: f64,
    /// Slots per day.
    pub slots: u32,
}

impl SettingsRecord {
    /// The record of `s`.
    pub fn of(s: &PlannerSettings) -> Self {
        let (budget, per_feed) = match s.budget {
            Budget::PerDay(m) => (m, false),
            Budget::PerFeedPerDay(x) => (x, true),
        };
        SettingsRecord {
            budget,
            per_feed,
            metric: s.metric.name().into(),
            policy: s.policy.name().into(),
            min_fetches_per_day: s.min_fetches_per_day,
            max_fetches_per_day: s.max_fetches_per_day.unwrap_or(0.0),
            slots: s.slots as u32,
        }
    }

    /// The settings `base` with this record's fields (learning parameters stay), validated.
    pub fn apply(&self, base: &PlannerSettings) -> Result<PlannerSettings, SettingsError> {
        SettingsPatch {
            budget: Some(if self.per_feed {
                Budget::PerFeedPerDay(self.budget)
            } else {
                Budget::PerDay(self.budget)
            }),
            metric: Some(self.metric.clone()),
            policy: Some(self.policy.clone()),
            min_fetches_per_day: Some(self.min_fetches_per_day),
            max_fetches_per_day: Some(self.max_fetches_per_day),
            slots: Some(self.slots),
        }
        .apply(base)
    }
}

/// A change of the run-time settings: only the fields present change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SettingsPatch {
    /// The budget, as a total or per feed.
    pub budget: Option<Budget>,
    /// Metric name.
    pub metric: Option<String>,
    /// Policy name.
    pub policy: Option<String>,
    /// Minimum fetches per feed per day.
    pub min_fetches_per_day: Option<f64>,
    /// Maximum fetches per feed per day; 0 removes the maximum.
    pub max_fetches_per_day: Option<f64>,
    /// Slots per day.
    pub slots: Option<u32>,
}

/// Why settings were not changed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    /// The settings asked for are not valid (`INVALID_ARGUMENT`).
    #[error("{0}")]
    Invalid(String),
    /// The store (or the registry it reads) did not answer; nothing changed (`UNAVAILABLE`).
    #[error("the settings could not be read or stored: {0}")]
    Unavailable(String),
}

impl SettingsPatch {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == SettingsPatch::default()
    }

    /// `base` with the patch's fields, validated once ([`PlannerSettings::validate`]).
    pub fn apply(&self, base: &PlannerSettings) -> Result<PlannerSettings, SettingsError> {
        let invalid = SettingsError::Invalid;
        let mut s = base.clone();
        if let Some(b) = self.budget {
            s.budget = b;
        }
        if let Some(m) = &self.metric {
            s.metric = m.parse().map_err(invalid)?;
        }
        if let Some(p) = &self.policy {
            s.policy = p.parse().map_err(invalid)?;
        }
        if let Some(x) = self.min_fetches_per_day {
            s.min_fetches_per_day = x;
        }
        if let Some(x) = self.max_fetches_per_day {
            // 0 means "no maximum"; anything else must be a valid maximum (a NaN or a
            // negative number is refused by the validation, not read as "none").
            s.max_fetches_per_day = (x != 0.0).then_some(x);
        }
        if let Some(n) = self.slots {
            s.slots = n as usize;
        }
        s.validate().map_err(invalid)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_changes_only_its_fields_and_a_per_feed_budget_stays_per_feed() {
        let base = PlannerSettings {
            budget: Budget::PerFeedPerDay(4.0),
            max_fetches_per_day: Some(48.0),
            ..PlannerSettings::default()
        };
        let s = SettingsPatch {
            metric: Some("miss".into()),
            ..Default::default()
        }
        .apply(&base)
        .unwrap();
        assert_eq!(s.budget, Budget::PerFeedPerDay(4.0));
        assert_eq!(s.max_fetches_per_day, Some(48.0));
        assert_eq!(s.metric.name(), "miss");
        let s = SettingsPatch {
            budget: Some(Budget::PerDay(500.0)),
            max_fetches_per_day: Some(0.0),
            ..Default::default()
        }
        .apply(&base)
        .unwrap();
        assert_eq!(s.budget, Budget::PerDay(500.0));
        assert_eq!(s.max_fetches_per_day, None);
        assert!(SettingsPatch::default().is_empty());
    }

    #[test]
    fn invalid_values_are_refused_as_invalid() {
        let base = PlannerSettings::default();
        for bad in [
            SettingsPatch {
                policy: Some("fastest".into()),
                ..Default::default()
            },
            SettingsPatch {
                budget: Some(Budget::PerDay(f64::NAN)),
                ..Default::default()
            },
            SettingsPatch {
                budget: Some(Budget::PerFeedPerDay(-1.0)),
                ..Default::default()
            },
            SettingsPatch {
                max_fetches_per_day: Some(f64::NAN),
                ..Default::default()
            },
            SettingsPatch {
                slots: Some(0),
                ..Default::default()
            },
        ] {
            assert!(
                matches!(bad.apply(&base), Err(SettingsError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_record_round_trips_through_its_settings() {
        let s = PlannerSettings {
            budget: Budget::PerFeedPerDay(0.5),
            ..PlannerSettings::default()
        };
        let r = SettingsRecord::of(&s);
        assert_eq!(SettingsRecord::of(&r.apply(&s).unwrap()), r);
    }

    #[test]
    fn settings_that_could_never_be_planned_are_refused_not_cleared() {
        let base = PlannerSettings::default();
        let good = SettingsRecord::of(&base);
        assert!(good.apply(&base).is_ok());
        let with = |f: &dyn Fn(&mut SettingsRecord)| {
            let mut r = good.clone();
            f(&mut r);
            r.apply(&base)
        };
        // A maximum of NaN or −5 was silently read as "no maximum".
        assert!(with(&|r| r.max_fetches_per_day = f64::NAN).is_err());
        assert!(with(&|r| r.max_fetches_per_day = -5.0).is_err());
        assert_eq!(
            with(&|r| r.max_fetches_per_day = 0.0)
                .unwrap()
                .max_fetches_per_day,
            None
        );
        // A minimum of 1e308 was accepted and stopped every replan.
        assert!(with(&|r| r.min_fetches_per_day = 1e308).is_err());
        assert!(
            with(&|r| r.min_fetches_per_day = 5.0).is_err(),
            "above the budget of 4"
        );
        assert!(with(&|r| r.budget = f64::NAN).is_err());
    }
}
