//! The term's workers, kept in the store so that the next leader awaits them.
//!
//! A failover ends every worker's session, and each worker keeps fetching its last
//! assignment while it looks for the new leader. A new leader that dealt every host to
//! the first worker to arrive would have hosts fetched by two workers for the same planned
//! slots, then moved back as the others arrive. So the leader writes its workers' names
//! and capacities, with the hosts the load bound spilled to each (`members`), whenever they
//! change, and the next one holds their places
//! in the hashing ([`Cluster::await_members`]) for two worker leases from when it begins
//! serving (a worker may take a lease to notice that its leader is gone, then finds the new
//! one within seconds): each worker that comes back gets the hosts it was fetching, and
//! the hosts of one that does not go to the others when the time has passed. The spilled
//! hosts are named because where the bound spills a host depends on the loads it is dealt
//! by, and the next leader's first plan is not the last one's.

use super::Hub;
use crate::control::cluster::{Cluster, Member, MAX_SPILLED_STORED};
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};

/// Reads the last term's workers and holds their places in `cluster` for two worker leases.
/// An unreadable record is skipped (said once): the hosts are then dealt as workers come.
pub(super) async fn load<B: KvBackend>(
    store: &B,
    cluster: &mut Cluster,
) -> anyhow::Result<Vec<Member>> {
    let Some(v) = store.get(Key::Members.encode()?).await? else {
        return Ok(Vec::new());
    };
    let members: Vec<Member> = match serde_json::from_slice(&v) {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %e, "the last term's worker list is unreadable; hosts are dealt as workers register");
            return Ok(Vec::new());
        }
    };
    let wait = 2 * cluster.config().lease;
    cluster.await_members(&members, wait);
    let awaited = cluster.awaited();
    if !awaited.is_empty() {
        tracing::info!(workers = ?awaited, ?wait, "holding the last term's workers' hosts until they register again");
    }
    Ok(members)
}

impl<B: KvBackend> Hub<B> {
    /// Writes the term's workers when they changed since the last write. A failed write is
    /// logged and tried again at the next change or lease check: the next leader would
    /// await an older list, which costs at most one lease of the hosts of a worker added
    /// since.
    pub(super) async fn save_members(&self) {
        let mut saved = self.members_saved.lock().await;
        let now = self.actor.ask(super::messages::Members).await;
        if *saved == now {
            return;
        }
        let spilled: usize = now.iter().map(|m| m.spilled.len()).sum();
        if spilled >= MAX_SPILLED_STORED {
            tracing::warn!(
                named = spilled,
                "the load bound spilled more hosts than the worker list names; at a failover the next leader may move the others"
            );
        }
        let body = serde_json::to_vec(&now).expect("members serialize");
        let key = Key::Members.encode().expect("a fixed key");
        match self.store.batch(vec![Op::Put(key, body)]).await {
            Ok(()) => *saved = now,
            Err(e) => {
                tracing::warn!(error = %e, "the term's worker list not stored; tried again at the next lease check")
            }
        }
    }

    /// Gives up on the last term's workers that have not come back in time.
    pub(super) async fn stop_awaiting(&self) {
        let now_ms = self.clock.now_ms();
        let gone = self
            .actor
            .ask(super::messages::StopAwaiting { now_ms })
            .await;
        if !gone.is_empty() {
            tracing::warn!(workers = ?gone, "workers of the last term did not register again within two worker leases; their hosts are dealt to the others");
        }
    }
}
