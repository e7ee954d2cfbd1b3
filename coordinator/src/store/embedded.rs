//! The embedded backend: one redb file (`kairos.redb` under the data directory).
//!
//! redb is synchronous and every write transaction commits durably (fsync), so each call
//! runs on tokio's blocking pool rather than on the async threads.

use super::{KvBackend, Op, Pairs, StoreError};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use std::sync::Arc;

const KV: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

/// A redb-backed store.
#[derive(Clone, Debug)]
pub struct EmbeddedBackend {
    db: Arc<Database>,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl EmbeddedBackend {
    /// Opens (or creates) `dir/kairos.redb`, creating `dir` if needed.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join("kairos.redb");
        let db = Database::create(&path)
            .map_err(|e| StoreError(format!("opening {}: {e}", path.display())))?;
        // Make sure the table exists so readers never see "table does not exist".
        let tx = db.begin_write().map_err(err)?;
        tx.open_table(KV).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(EmbeddedBackend { db: Arc::new(db) })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError(format!("store task failed: {e}")))?
    }
}

impl KvBackend for EmbeddedBackend {
    async fn get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let table = tx.open_table(KV).map_err(err)?;
            Ok(table
                .get(key.as_slice())
                .map_err(err)?
                .map(|v| v.value().to_vec()))
        })
        .await
    }

    async fn get_many(&self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.blocking(move |db| {
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
        })
        .await
    }

    async fn put_if_absent(&self, key: Vec<u8>, value: Vec<u8>) -> Result<bool, StoreError> {
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            let written = {
                let mut table = tx.open_table(KV).map_err(err)?;
                if table.get(key.as_slice()).map_err(err)?.is_some() {
                    false
                } else {
                    table
                        .insert(key.as_slice(), value.as_slice())
                        .map_err(err)?;
                    true
                }
            };
            tx.commit().map_err(err)?;
            Ok(written)
        })
        .await
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut table = tx.open_table(KV).map_err(err)?;
                for op in &ops {
                    match op {
                        Op::Put(k, v) => {
                            table.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                        }
                        Op::Delete(k) => {
                            table.remove(k.as_slice()).map_err(err)?;
                        }
                    }
                }
            }
            tx.commit().map_err(err)
        })
        .await
    }

    async fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Pairs, StoreError> {
        self.blocking(move |db| {
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
        })
        .await
    }
}
