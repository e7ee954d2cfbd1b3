//! The embedded backend: one redb file (`kairos.redb` under the data directory).
//!
//! redb is synchronous and every write transaction commits durably (fsync), so each call
//! runs on tokio's blocking pool rather than on the async threads.
//!
//! **A failed write** (a full disk, an I/O error) leaves redb refusing every later
//! transaction until the file is opened again. So the first failure marks the store
//! unwritable (health goes NOT_SERVING, see [`KvBackend::writable`]), and
//! [`KvBackend::recover`] — called by the server's health loop — closes the file once no
//! call holds it, reopens it (redb repairs an interrupted commit on open) and proves a
//! write with a probe key before the store counts as writable again. It waits first for
//! [`MIN_FREE_BYTES`] free on the filesystem: redb's file keeps free pages, so a probe alone
//! would succeed on a still-full disk and health would flap with every tick.

use super::keys::Key;
use super::{Compare, KvBackend, Op, Pairs, StoreError, StoreFuture};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");
/// The revision that last wrote each key of `kv`.
const REVS: TableDefinition<&[u8], u64> = TableDefinition::new("revs");
/// The store's revision, under [`REVISION`].
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const REVISION: &str = "revision";

/// Free space a failed store waits for before it reopens.
pub const MIN_FREE_BYTES: u64 = 16 << 20;
/// redb's page cache when not told otherwise. redb's own default is 1 GiB, which at 100k
/// feeds was a fifth of the coordinator's memory (docs/BENCHMARKS.md, soak); the hot set —
/// learned states, the registry and the postings' tails — is far smaller.
pub const DEFAULT_CACHE_BYTES: usize = 128 << 20;

/// A redb-backed store.
#[derive(Clone, Debug)]
pub struct EmbeddedBackend {
    path: PathBuf,
    /// The open database; `None` between closing a failed one and reopening it.
    db: Arc<RwLock<Option<Arc<Database>>>>,
    writable: Arc<AtomicBool>,
    cache_bytes: usize,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

fn open_db(path: &Path, cache_bytes: usize) -> Result<Database, StoreError> {
    let db = Database::builder()
        .set_cache_size(cache_bytes)
        .create(path)
        .map_err(|e| StoreError(format!("opening {}: {e}", path.display())))?;
    // Make sure the table exists so readers never see "table does not exist".
    let tx = db.begin_write().map_err(err)?;
    tx.open_table(KV).map_err(err)?;
    tx.open_table(REVS).map_err(err)?;
    tx.open_table(META).map_err(err)?;
    tx.commit().map_err(err)?;
    Ok(db)
}

impl EmbeddedBackend {
    /// Opens (or creates) `dir/kairos.redb`, creating `dir` if needed, with a page cache
    /// of [`DEFAULT_CACHE_BYTES`].
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// [`EmbeddedBackend::open`] with redb's page cache capped at `cache_bytes`.
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join("kairos.redb");
        let db = open_db(&path, cache_bytes)?;
        Ok(EmbeddedBackend {
            path,
            db: Arc::new(RwLock::new(Some(Arc::new(db)))),
            writable: Arc::new(AtomicBool::new(true)),
            cache_bytes,
        })
    }

    fn current(&self) -> Result<Arc<Database>, StoreError> {
        self.db
            .read()
            .map_err(|_| StoreError("store handle poisoned".into()))?
            .clone()
            .ok_or_else(|| {
                StoreError(format!(
                    "{} is being reopened after a failed write",
                    self.path.display()
                ))
            })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.current()?;
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError(format!("store task failed: {e}")))?
    }

    /// A write through [`Self::blocking`] whose failure marks the store unwritable.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let out = self.blocking(f).await;
        if let Err(e) = &out {
            if self.writable.swap(false, Ordering::SeqCst) {
                // Logged once per outage; the callers answer UNAVAILABLE and retry.
                tracing::error!(path = %self.path.display(), error = %e, "store write failed; health is NOT_SERVING until a reopen succeeds");
            }
            metrics::counter!(crate::metrics::STORE_WRITE_FAILURES_TOTAL).increment(1);
        }
        out
    }

    /// Closes the failed database (once no call holds it), opens it again and proves a
    /// write. Runs on the blocking pool.
    fn reopen(&self) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let fs = rustix::fs::statvfs(dir)
            .map_err(|e| StoreError(format!("statvfs {}: {e}", dir.display())))?;
        let free = fs.f_bavail.saturating_mul(fs.f_frsize);
        if free < MIN_FREE_BYTES {
            return Err(StoreError(format!(
                "{free} bytes free under {}; waiting for {MIN_FREE_BYTES}",
                dir.display()
            )));
        }
        {
            let mut slot = self
                .db
                .write()
                .map_err(|_| StoreError("store handle poisoned".into()))?;
            if let Some(db) = slot.take() {
                match Arc::try_unwrap(db) {
                    Ok(db) => drop(db), // releases the file lock
                    Err(shared) => {
                        *slot = Some(shared);
                        return Err(StoreError("a call still holds the failed store".into()));
                    }
                }
            }
            *slot = Some(Arc::new(open_db(&self.path, self.cache_bytes)?));
        }
        let probe = Key::Probe.encode().map_err(err)?;
        let db = self.current()?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let tx = db.begin_write().map_err(err)?;
        apply(&tx, &[Op::Put(probe, stamp.to_be_bytes().to_vec())])?;
        tx.commit().map_err(err)
    }
}

/// Applies `ops` in `tx` as the store's next revision.
fn apply(tx: &WriteTransaction, ops: &[Op]) -> Result<(), StoreError> {
    let mut meta = tx.open_table(META).map_err(err)?;
    let revision = meta.get(REVISION).map_err(err)?.map_or(0, |v| v.value()) + 1;
    meta.insert(REVISION, revision).map_err(err)?;
    let mut table = tx.open_table(KV).map_err(err)?;
    let mut revs = tx.open_table(REVS).map_err(err)?;
    for op in ops {
        match op {
            Op::Put(k, v) => {
                table.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                revs.insert(k.as_slice(), revision).map_err(err)?;
            }
            Op::Delete(k) => {
                table.remove(k.as_slice()).map_err(err)?;
                revs.remove(k.as_slice()).map_err(err)?;
            }
        }
    }
    Ok(())
}

/// The value and revision of `key` as `tx` sees it. A key written before revisions were
/// kept counts as revision 1.
fn read_revision(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    revs: &impl ReadableTable<&'static [u8], u64>,
    key: &[u8],
) -> Result<Option<(Vec<u8>, u64)>, StoreError> {
    let Some(v) = table.get(key).map_err(err)? else {
        return Ok(None);
    };
    let rev = revs.get(key).map_err(err)?.map_or(1, |r| r.value());
    Ok(Some((v.value().to_vec(), rev)))
}

impl KvBackend for EmbeddedBackend {
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let table = tx.open_table(KV).map_err(err)?;
            Ok(table
                .get(key.as_slice())
                .map_err(err)?
                .map(|v| v.value().to_vec()))
        }))
    }

    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>> {
        Box::pin(self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let table = tx.open_table(KV).map_err(err)?;
            let revs = tx.open_table(REVS).map_err(err)?;
            read_revision(&table, &revs, &key)
        }))
    }

    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>> {
        Box::pin(self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let table = tx.open_table(KV).map_err(err)?;
            keys.iter()
                .map(|k| {
                    Ok(table
                        .get(k.as_slice())
                        .map_err(err)?
                        .map(|v| v.value().to_vec()))
                })
                .collect()
        }))
    }

    fn batch(&self, ops: Vec<Op>) -> StoreFuture<'_, ()> {
        Box::pin(self.write(move |db| {
            let tx = db.begin_write().map_err(err)?;
            apply(&tx, &ops)?;
            tx.commit().map_err(err)
        }))
    }

    fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreFuture<'_, bool> {
        Box::pin(self.write(move |db| {
            let tx = db.begin_write().map_err(err)?;
            let holds = {
                let table = tx.open_table(KV).map_err(err)?;
                let revs = tx.open_table(REVS).map_err(err)?;
                let mut all = true;
                for c in &compares {
                    let ok = match c {
                        Compare::Value(k, want) => {
                            read_revision(&table, &revs, k)?.map(|(v, _)| v) == *want
                        }
                        Compare::Revision(k, want) => {
                            read_revision(&table, &revs, k)?.map_or(0, |(_, r)| r) == *want
                        }
                    };
                    if !ok {
                        all = false;
                        break;
                    }
                }
                all
            };
            if !holds {
                tx.abort().map_err(err)?;
                return Ok(false);
            }
            apply(&tx, &ops)?;
            tx.commit().map_err(err)?;
            Ok(true)
        }))
    }

    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, Pairs> {
        Box::pin(self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let table = tx.open_table(KV).map_err(err)?;
            let mut out = Vec::new();
            let start: &[u8] = match &after {
                Some(a) if a.as_slice() >= prefix.as_slice() => a.as_slice(),
                _ => prefix.as_slice(),
            };
            for entry in table.range(start..).map_err(err)? {
                let (k, v) = entry.map_err(err)?;
                let k = k.value();
                if !k.starts_with(&prefix) || out.len() >= limit {
                    break;
                }
                if after.as_deref() == Some(k) {
                    continue; // `after` is exclusive
                }
                out.push((k.to_vec(), v.value().to_vec()));
            }
            Ok(out)
        }))
    }

    fn writable(&self) -> bool {
        self.writable.load(Ordering::SeqCst)
    }

    fn recover(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let me = self.clone();
            tokio::task::spawn_blocking(move || me.reopen())
                .await
                .map_err(|e| StoreError(format!("store task failed: {e}")))??;
            if !self.writable.swap(true, Ordering::SeqCst) {
                tracing::info!(path = %self.path.display(), "store reopened and writable again");
            }
            Ok(())
        })
    }
}
