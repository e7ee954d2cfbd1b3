//! An in-memory backend: the reference semantics, and the store of tests and of
//! `standalone` runs without a data directory.

use super::{Compare, KvBackend, Op, Pairs, StoreError, StoreFuture};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Values with the revision that last wrote them, and the store's revision.
#[derive(Debug, Default)]
struct State {
    map: BTreeMap<Vec<u8>, (Vec<u8>, u64)>,
    revision: u64,
}

impl State {
    fn holds(&self, c: &Compare) -> bool {
        match c {
            Compare::Value(k, want) => self.map.get(k).map(|(v, _)| v) == want.as_ref(),
            Compare::Revision(k, want) => self.map.get(k).map_or(0, |(_, r)| *r) == *want,
        }
    }

    fn apply(&mut self, ops: Vec<Op>) {
        self.revision += 1;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    self.map.insert(k, (v, self.revision));
                }
                Op::Delete(k) => {
                    self.map.remove(&k);
                }
            }
        }
    }
}

/// A `BTreeMap` behind a mutex.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    state: Mutex<State>,
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>, StoreError> {
        self.state
            .lock()
            .map_err(|_| StoreError("memory store poisoned by a panic".into()))
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, key: Vec<u8>) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move { Ok(self.lock()?.map.get(&key).map(|(v, _)| v.clone())) })
    }

    fn get_revision(&self, key: Vec<u8>) -> StoreFuture<'_, Option<(Vec<u8>, u64)>> {
        Box::pin(async move { Ok(self.lock()?.map.get(&key).cloned()) })
    }

    fn get_many(&self, keys: Vec<Vec<u8>>) -> StoreFuture<'_, Vec<Option<Vec<u8>>>> {
        Box::pin(async move {
            let st = self.lock()?;
            Ok(keys
                .iter()
                .map(|k| st.map.get(k).map(|(v, _)| v.clone()))
                .collect())
        })
    }

    fn batch(&self, ops: Vec<Op>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.lock()?.apply(ops);
            Ok(())
        })
    }

    fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let mut st = self.lock()?;
            if !compares.iter().all(|c| st.holds(c)) {
                return Ok(false);
            }
            st.apply(ops);
            Ok(true)
        })
    }

    fn range(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> StoreFuture<'_, Pairs> {
        Box::pin(async move {
            let st = self.lock()?;
            let start = match &after {
                Some(a) if a.as_slice() >= prefix.as_slice() => {
                    std::ops::Bound::Excluded(a.clone())
                }
                _ => std::ops::Bound::Included(prefix.clone()),
            };
            Ok(st
                .map
                .range((start, std::ops::Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(&prefix))
                .take(limit)
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect())
        })
    }
}
