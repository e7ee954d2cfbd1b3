//! An in-memory backend: the reference semantics, and the store of tests and of
//! `standalone` runs without a data directory.

use super::{KvBackend, Op, Pairs, StoreError};
use std::collections::BTreeMap;
use std::sync::Mutex;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// A `BTreeMap` behind a mutex.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    map: Mutex<Map>,
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Map>, StoreError> {
        self.map
            .lock()
            .map_err(|_| StoreError("memory store poisoned by a panic".into()))
    }
}

impl KvBackend for MemoryBackend {
    async fn get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock()?.get(&key).cloned())
    }

    async fn get_many(&self, keys: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let map = self.lock()?;
        Ok(keys.iter().map(|k| map.get(k).cloned()).collect())
    }

    async fn put_if_absent(&self, key: Vec<u8>, value: Vec<u8>) -> Result<bool, StoreError> {
        let mut map = self.lock()?;
        if map.contains_key(&key) {
            return Ok(false);
        }
        map.insert(key, value);
        Ok(true)
    }

    async fn batch(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        let mut map = self.lock()?;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    map.insert(k, v);
                }
                Op::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }

    async fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Pairs, StoreError> {
        let map = self.lock()?;
        let start = match &after {
            Some(a) if a.as_slice() >= prefix.as_slice() => std::ops::Bound::Excluded(a.clone()),
            _ => std::ops::Bound::Included(prefix.clone()),
        };
        Ok(map
            .range((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}
