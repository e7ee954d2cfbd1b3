//! Removing a feed or a user, and what goes with them.
//!
//! A removed feed takes with it, besides its registry entry and subscriptions (one atomic
//! batch, [`crate::registry::Registry::remove_feed`]): its learned state (same batch), its
//! reader statistics, its stored postings and the item markers ingest kept for it
//! ([`crate::ingest::Ingestor::forget_feed`]; its ingest record keeps only its next
//! posting number). A removed user takes their access histograms.
//!
//! Reports race a removal: a worker's report is checked (the worker owns the feed in the
//! plan) before it waits for the learned-state lock that removal holds, so a report checked
//! just before the removal would, once the lock is free, write the feed's postings and state
//! back. The hub remembers feeds removed in the last [`REMOVED_KEPT_MS`] and drops their
//! reports at that point, counted with the rejected ones. Registering the id again clears
//! it. A removal made through another coordinator of a cluster is not seen here; what such
//! a race leaves is cleared at the next leader's start (learned state) or by retention
//! (postings).

use super::messages as msg;
use super::Hub;
use crate::metrics as m;
use crate::registry::RegistryError;
use crate::store::KvBackend;

/// How long a removed feed's reports are dropped: far longer than a report waits between
/// its check and its write, and a round re-plans the feed away well within it.
pub(super) const REMOVED_KEPT_MS: i64 = 3_600_000;

impl<B: KvBackend> Hub<B> {
    /// Removes a feed, its learned state, reader statistics, postings and item markers.
    pub async fn remove_feed(&self, id: &str) -> Result<(), RegistryError> {
        // Report ingest reads and writes learned state under this lock: a batch that holds
        // it ends before the removal, and one that waited for it finds the feed removed.
        let _writer = self.learned_writes.lock().await;
        self.registry.remove_feed(id).await?;
        self.actor
            .ask(msg::FeedRemoved {
                id: id.to_string(),
                now_ms: self.clock.now_ms(),
            })
            .await;
        metrics::gauge!(m::REGISTRY_FEEDS).decrement(1.0);
        // The feed is gone whatever happens to its postings: retention expires them in
        // any case, so a failure here is said and the removal stands.
        match self.ingestor.forget_feed(id).await {
            Ok(deleted) => tracing::debug!(
                feed = id,
                records = deleted,
                "removed feed's postings deleted"
            ),
            Err(e) => {
                tracing::warn!(feed = id, error = %e, "could not delete a removed feed's postings; retention will")
            }
        }
        Ok(())
    }

    /// Removes a user (and from the access statistics).
    pub async fn remove_user(&self, id: &str) -> Result<(), RegistryError> {
        self.registry.remove_user(id).await?;
        self.actor.ask(msg::UserRemoved(id.to_string())).await;
        metrics::gauge!(m::REGISTRY_USERS).decrement(1.0);
        Ok(())
    }
}
