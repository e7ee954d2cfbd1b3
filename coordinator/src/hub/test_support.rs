//! What the hub's unit tests share: the runtime they block on and a hub opened on a test
//! store.

use super::{Hub, HubConfig};
use crate::control::cluster::ClusterConfig;
use crate::control::relearn::PlannerSettings;
use crate::store::KvBackend;
use kairos_runtime::clock::SimClock;
use std::sync::Arc;
use std::time::Duration;

/// The runtime the hub's unit tests block on: one worker thread, timers and I/O enabled.
pub(crate) fn test_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a test runtime")
}

/// A hub for unit tests: sessions that never expire in wall time, hourly replans.
pub(crate) async fn open_for_tests<B: KvBackend>(store: Arc<B>, clock: SimClock) -> Hub<B> {
    open_with_planner_for_tests(store, clock, Default::default()).await
}

/// [`open_for_tests`] with these planner settings.
pub(crate) async fn open_with_planner_for_tests<B: KvBackend>(
    store: Arc<B>,
    clock: SimClock,
    planner: PlannerSettings,
) -> Hub<B> {
    Hub::open(
        store,
        clock,
        HubConfig {
            cluster: ClusterConfig {
                lease: Duration::from_secs(1 << 30),
                ..ClusterConfig::default()
            },
            planner,
            replan_interval: Duration::from_secs(3600),
            health: Default::default(),
            retention: Default::default(),
            plan_snapshot_every: None,
            private_allowed: Vec::new(),
        },
    )
    .await
    .expect("a hub opens on a test store")
}
