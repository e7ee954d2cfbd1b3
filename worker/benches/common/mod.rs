//! Set-up shared by the worker benches: the loopback farm they fetch from and a fetcher
//! allowed to reach it.

use kairos_farm::farm::{Farm, FarmConfig, RunningFarm};
use kairos_runtime::clock::SimClock;
use kairos_worker::fetch::{FetchConfig, Fetcher};
use kairos_worker::target::TargetPolicy;
use std::sync::Arc;

/// 1,000 feeds on 8 loopback hosts with ten days of history, so every feed serves a full
/// document: 15 items of about 650 bytes (10.2 KB).
pub async fn farm() -> (Arc<Farm>, RunningFarm) {
    let farm = Arc::new(Farm::generate(
        FarmConfig {
            feeds: 1000,
            hosts: 8,
            mean_posts_per_day: 6.0,
            days: 0.0,
            history_days: 10.0,
            pad_bytes: 520,
            seed: 3,
            faults: Default::default(),
            ..FarmConfig::default()
        },
        SimClock::new(0, 1.0),
    ));
    let running = farm.clone().serve().await.expect("serve the farm");
    (farm, running)
}

/// A fetcher with default limits that may reach loopback.
pub fn loopback_fetcher() -> Fetcher {
    Fetcher::new(FetchConfig {
        policy: TargetPolicy::allowing(vec!["127.0.0.0/8".parse().expect("network")]),
        ..FetchConfig::default()
    })
    .expect("fetcher")
}
