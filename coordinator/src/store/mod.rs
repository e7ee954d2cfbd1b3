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
pub mod etcd;
pub mod keys;
pub mod memory;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod sizes;

use std::future::Future;
use std::pin::Pin;

/// A failure of the storage layer (I/O, corruption, a closed database, a lost connection).
#[derive(Debug, thiserror::Error)]
#[error("store: {0}")]
pub struct StoreError(pub String);

/// Key-value pairs, in key order.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What every store call returns: boxed, so [`KvBackend`] can be a trait object (the
/// server picks its backend at run time).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// One write of an atomic batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Set `key` to `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key` (no error if absent).
    Delete(Vec<u8>),
}

/// A condition of a [`KvBackend::txn`], checked atomically with its writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    /// The key holds exactly this value (`None`: the key is absent).
    Value(Vec<u8>, Option<Vec<u8>>),
    /// The key was last written at this revision (`0`: the key is absent). Revisions come
    /// from [`KvBackend::get_revision`].
    Revision(Vec<u8>, u64),
}

/// The storage contract every backend (in-memory, embedded, etcd) fulfils.
///
/// Every committed write (a `batch`, a successful `txn` or `put_if_absent`) moves the
/// store's revision forward, and each key it wrote carries that revision until it is
/// written again — etcd's `mod_revision`, kept the same way by the other backends.
pub trait KvBackend: Send + Sync + 'static {
    /// The value at `key`.
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>>;
    /// The value at `key` and the revision that wrote it.
    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>>;
    /// The values at several keys, read in one snapshot, in the order asked.
    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>>;
    /// Sets `key` only if it is absent; returns whether it was written (the basis of
    /// idempotent ingest and duplicate detection).
    fn put_if_absent(&self, key: Vec<u8>, value: Vec<u8>) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            self.txn(
                vec![Compare::Value(key.clone(), None)],
                vec![Op::Put(key, value)],
            )
            .await
        })
    }
    /// Applies all operations atomically, in order.
    fn batch(&self, ops: Vec<Op>) -> StoreFuture<'_, ()>;
    /// Applies `ops` atomically if every comparison holds; returns whether they did (and
    /// so whether anything was written).
    fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreFuture<'_, bool>;
    /// Up to `limit` pairs whose keys start with `prefix` and sort after `after` (if given),
    /// in key order.
    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, Pairs>;
    /// Whether writes are going through. A backend whose write failed answers `false` until
    /// [`Self::recover`] succeeds; the server reports NOT_SERVING meanwhile.
    fn writable(&self) -> bool {
        true
    }
    /// A cheap liveness check while the store counts as writable (a remote store's
    /// connection can break while nothing is written); a failure makes it unwritable.
    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    /// Tries to make an unwritable store writable again (reopen, reconnect) and proves it
    /// with a write; an error means "not yet".
    fn recover(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
    /// Drops the history of overwritten and deleted keys older than the previous call (a
    /// store that keeps history: etcd, where deleted postings keep their space until then);
    /// the revision compacted to, if any.
    fn compact(&self) -> StoreFuture<'_, Option<u64>> {
        Box::pin(async { Ok(None) })
    }
}

/// A backend chosen at run time is a backend.
impl<T: KvBackend + ?Sized> KvBackend for std::sync::Arc<T> {
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>> {
        (**self).get_revision(key)
    }
    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>> {
        (**self).get_many(keys)
    }
    fn put_if_absent(&self, key: Vec<u8>, value: Vec<u8>) -> StoreFuture<'_, bool> {
        (**self).put_if_absent(key, value)
    }
    fn batch(&self, ops: Vec<Op>) -> StoreFuture<'_, ()> {
        (**self).batch(ops)
    }
    fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreFuture<'_, bool> {
        (**self).txn(compares, ops)
    }
    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, Pairs> {
        (**self).range(prefix, after, limit)
    }
    fn writable(&self) -> bool {
        (**self).writable()
    }
    fn check(&self) -> StoreFuture<'_, ()> {
        (**self).check()
    }
    fn recover(&self) -> StoreFuture<'_, ()> {
        (**self).recover()
    }
    fn compact(&self) -> StoreFuture<'_, Option<u64>> {
        (**self).compact()
    }
}
