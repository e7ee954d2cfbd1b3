//! Which of the coordinator's replicas leads, asked of all of them at once.
//!
//! A worker is given every replica's address. When its session ends (the leader died, was
//! cut off or stepped down), trying the addresses in turn would spend a connect timeout on
//! each one that is paused or unreachable, and sleeping through a long back-off would keep
//! it away from a new leader that began serving meanwhile; a new leader holds the hosts of
//! the last term's workers for two worker leases only (the coordinator's
//! `control::cluster`), so a worker that comes back later finds its hosts dealt to others.
//! Health checks are cheap, so a worker without a leader asks about once a second.

use std::time::Duration;
use tonic::transport::Endpoint;

/// How long a worker whose session ended waits for the replicas to say which one leads.
pub const LEADER_PROBE: Duration = Duration::from_secs(2);

/// The index of the first of several `endpoints` whose gRPC health says SERVING (only the
/// leader does; standbys say NOT_SERVING), all asked at once, within `within`; `None` when
/// none does in time or there is one address only (it is tried again anyway).
pub async fn leading(endpoints: &[(String, Endpoint)], within: Duration) -> Option<usize> {
    if endpoints.len() < 2 {
        return None;
    }
    let mut asks = tokio::task::JoinSet::new();
    for (i, (_, endpoint)) in endpoints.iter().enumerate() {
        let endpoint = endpoint.clone().connect_timeout(within).timeout(within);
        asks.spawn(async move {
            let channel = endpoint.connect().await.ok()?;
            let status = tonic_health::pb::health_client::HealthClient::new(channel)
                .check(tonic_health::pb::HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .ok()?
                .into_inner()
                .status;
            (status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32)
                .then_some(i)
        });
    }
    // The first to say so: of two that both do for a moment (one about to find out it was
    // deposed), a session with the wrong one ends at its first refused call.
    let found = tokio::time::timeout(within, async {
        while let Some(done) = asks.join_next().await {
            if let Ok(Some(i)) = done {
                return Some(i);
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    asks.abort_all();
    found
}

/// How often a worker without a leader asks again while it waits.
const ASK_EVERY: Duration = Duration::from_secs(1);

/// Waits up to `wait`, asking every second (`ASK_EVERY`) which replica leads; the first one found,
/// or `None` once `wait` has passed (always `None` with a single address, after `wait`).
pub async fn wait_for_leader(endpoints: &[(String, Endpoint)], wait: Duration) -> Option<usize> {
    let until = tokio::time::Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        tokio::time::sleep(left.min(ASK_EVERY)).await;
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        if let Some(i) = leading(endpoints, LEADER_PROBE.min(left)).await {
            return Some(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::coordinator_endpoints;
    use crate::credentials::Credentials;

    /// A gRPC health server on a free loopback port saying `serving`; its address, and the
    /// reporter that changes what it says.
    async fn replica(serving: bool) -> (String, tonic_health::server::HealthReporter) {
        let (reporter, service) = tonic_health::server::health_reporter();
        let status = if serving {
            tonic_health::ServingStatus::Serving
        } else {
            tonic_health::ServingStatus::NotServing
        };
        reporter.set_service_status("", status).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(kairos_runtime::listener::accept_grpc(listener, "test")),
        );
        (format!("http://{addr}"), reporter)
    }

    #[tokio::test]
    async fn a_worker_finds_the_replica_that_leads_among_its_addresses() {
        let credentials = Credentials::default();
        let (standby, _) = replica(false).await;
        let (leader, _) = replica(true).await;
        // Nothing listens there: refused at once.
        let gone = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let list = format!("{gone},{standby},{leader}");
        let endpoints = coordinator_endpoints(&credentials, &list).unwrap();
        assert_eq!(leading(&endpoints, Duration::from_secs(2)).await, Some(2));
        // No replica leads: none named, within the probe's time.
        let list = format!("{standby},{gone}");
        let endpoints = coordinator_endpoints(&credentials, &list).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(leading(&endpoints, Duration::from_millis(500)).await, None);
        assert!(started.elapsed() < Duration::from_secs(2));
        // One address: nothing to choose.
        let endpoints = coordinator_endpoints(&credentials, &leader).unwrap();
        assert_eq!(leading(&endpoints, Duration::from_secs(2)).await, None);
    }

    #[tokio::test]
    async fn a_worker_waiting_for_a_leader_goes_to_one_as_soon_as_it_serves() {
        let credentials = Credentials::default();
        let (standby, _) = replica(false).await;
        let gone = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let endpoints = coordinator_endpoints(&credentials, &format!("{standby},{gone}")).unwrap();
        // Nobody leads: the whole wait passes.
        let started = std::time::Instant::now();
        assert_eq!(
            wait_for_leader(&endpoints, Duration::from_millis(1500)).await,
            None
        );
        assert!(started.elapsed() >= Duration::from_millis(1500));
        // A replica that begins serving during a long wait is found about a second later.
        let (late, reporter) = replica(false).await;
        let endpoints = coordinator_endpoints(&credentials, &format!("{standby},{late}")).unwrap();
        let started = std::time::Instant::now();
        let promote = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            reporter
                .set_service_status("", tonic_health::ServingStatus::Serving)
                .await;
        });
        assert_eq!(
            wait_for_leader(&endpoints, Duration::from_secs(30)).await,
            Some(1)
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
            "{took:?}"
        );
        promote.await.unwrap();
    }
}
