//! The allocator's side of the process: hands freed pages back to the system from a
//! background thread, and samples the live heap and resident bytes into
//! `kairos_allocator_*` gauges, so an operator can tell a growing live set (state) from
//! memory the allocator keeps (fragmentation) without a profiler.

use std::time::Duration;

/// Time between samples; memory moves over minutes, a scrape comes every 15–30 s.
const EVERY: Duration = Duration::from_secs(5);

/// Turns on jemalloc's background purging and starts the sampler thread.
#[cfg(not(target_env = "msvc"))]
pub fn start() {
    // Without it, dirty pages are purged only when some thread allocates: an idle
    // coordinator after a large round would keep its peak.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        eprintln!("warning: allocator background purging unavailable: {e}");
    }
    let spawned = std::thread::Builder::new()
        .name("allocator-stats".into())
        .spawn(|| loop {
            match sample() {
                Ok((allocated, resident)) => {
                    kairos_coordinator::metrics::record_allocator(allocated, resident)
                }
                Err(e) => {
                    // A build without statistics: nothing to sample, now or later.
                    tracing::warn!(error = %e, "allocator statistics unavailable; kairos_allocator_* not exported");
                    return;
                }
            }
            std::thread::sleep(EVERY);
        });
    if let Err(e) = spawned {
        eprintln!("warning: allocator statistics thread not started: {e}");
    }
}

#[cfg(not(target_env = "msvc"))]
fn sample() -> Result<(u64, u64), tikv_jemalloc_ctl::Error> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // Statistics are a snapshot refreshed by advancing the epoch.
    epoch::advance()?;
    Ok((
        stats::allocated::read()? as u64,
        stats::resident::read()? as u64,
    ))
}

/// No jemalloc on this target: the system allocator, unsampled.
#[cfg(target_env = "msvc")]
pub fn start() {}
