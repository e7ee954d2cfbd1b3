//! Test fixtures shared by the planner's unit tests: a delay plan's settings and a feed
//! of hourly bins.

use super::alloc::HostCaps;
use super::cost::Metric;
use super::pattern::Smoothing;
use super::planner::{FeedModel, PlanConfig, Policy, Scheduler};

/// An optimal delay plan of one day in `slots` slots, a budget of 100, no caps.
pub(super) fn delay_cfg(slots: usize, smoothing: Smoothing) -> PlanConfig {
    PlanConfig {
        metric: Metric::Delay,
        policy: Policy::Optimal,
        scheduler: Scheduler::Exact,
        slots,
        period_seconds: 86_400.0,
        budget: 100.0,
        host_caps: HostCaps::uniform(None),
        smoothing,
        day_prices: Default::default(),
        slot_capacity: None,
    }
}

/// A feed of `weight` with hourly posting `bins`, no readers, one to 96 fetches a day.
pub(super) fn hourly_feed(bins: Vec<f32>, weight: f64) -> FeedModel {
    FeedModel {
        weight,
        post_bins: bins,
        peaks: Vec::new(),
        access_bins: vec![0.0; 24],
        min_level: 1,
        max_level: 96,
        host: None,
        document: None,
    }
}
