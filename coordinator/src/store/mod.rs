//! Durable state behind one key-value trait, with an embedded implementation (one redb
//! file under `--data-dir`) and an in-memory one, checked by one conformance suite.
//!
//! **What is persisted, and only that** (everything else — plans, shard assignments,
//! worker sessions — is rebuilt from it on start): the registry (feeds, users,
//! subscriptions, settings), the learned state (posting and access histograms, which would
//! take the training window to relearn), the ids of items already ingested per feed (so a
//! restarted coordinator still ingests idempotently) and the postings readers page through.
//!
//! Keys are built by [`keys::Key`] only — no ad-hoc strings at call sites — and are ordered
//! so each kind is one contiguous range. Values are JSON documents of the records that own
//! them (readable with any tool, and tolerant of added fields).

pub mod embedded;
pub mod keys;
pub mod memory;

#[cfg(test)]
mod conformance;

use std::future::Future;

/// A failure of the storage layer (I/O, corruption, a closed database).
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

/// Key-value pairs, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// One write of an atomic batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Set `key` to `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key` (no error if absent).
    Delete(Vec<u8>),
}

/// The storage contract every backend (embedded, etcd) fulfils.
pub trait KvBackend: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: Vec<u8>)
        -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;
    /// The values at several keys, read in one snapshot, in the order asked.
    fn get_many(
        &self,
        keys: Vec<Vec<u8>>,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send;
    /// Sets `key` only if it is absent; returns whether it was written (the basis of
    /// idempotent ingest and duplicate detection).
    fn put_if_absent(
        &self,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
    /// Applies all operations atomically, in order.
    fn batch(&self, ops: Vec<Op>) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Up to `limit` pairs whose keys start with `prefix` and sort after `after` (if given),
    /// in key order.
    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> impl Future<Output = Result<Pairs, StoreError>> + Send;
    /// Whether writes are going through. A backend whose write failed answers `false` until
    /// [`Self::recover`] succeeds; the server reports NOT_SERVING meanwhile.
    fn writable(&self) -> bool {
        true
    }
    /// Tries to make an unwritable store writable again (reopen, reconnect) and proves it
    /// with a write; an error means "not yet".
    fn recover(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }
}
