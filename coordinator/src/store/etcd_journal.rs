//! Batches bigger than one etcd transaction: written as a journal of chunks under
//! `journal/ID/`, a commit marker, then applied and deleted, so a crash part-way leaves a
//! journal the next [`EtcdBackend::connect`] applies (committed) or drops (not).

use super::{op_bytes, prefix_end, EtcdBackend, JOURNAL};
use crate::store::{Op, StoreError};
use etcd_client::{DeleteOptions, GetOptions, TxnOp};

/// One journal chunk: `[tag][key len u32][key]([value len u32][value])` per operation.
pub(super) fn encode(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        let (tag, k, v) = match op {
            Op::Put(k, v) => (b'P', k, Some(v)),
            Op::Delete(k) => (b'D', k, None),
        };
        out.push(tag);
        out.extend_from_slice(&(k.len() as u32).to_be_bytes());
        out.extend_from_slice(k);
        if let Some(v) = v {
            out.extend_from_slice(&(v.len() as u32).to_be_bytes());
            out.extend_from_slice(v);
        }
    }
    out
}

pub(super) fn decode(mut b: &[u8]) -> Result<Vec<Op>, StoreError> {
    let bad = || StoreError("corrupt journal chunk".into());
    let part = |b: &mut &[u8]| -> Result<Vec<u8>, StoreError> {
        let n =
            u32::from_be_bytes(b.get(..4).ok_or_else(bad)?.try_into().map_err(|_| bad())?) as usize;
        let v = b.get(4..4 + n).ok_or_else(bad)?.to_vec();
        *b = &b[4 + n..];
        Ok(v)
    };
    let mut ops = Vec::new();
    while let Some((&tag, rest)) = b.split_first() {
        b = rest;
        let k = part(&mut b)?;
        ops.push(match tag {
            b'P' => Op::Put(k, part(&mut b)?),
            b'D' => Op::Delete(k),
            _ => return Err(bad()),
        });
    }
    Ok(ops)
}

impl EtcdBackend {
    /// `ops` cut into runs that each fit one transaction.
    pub(super) fn chunks(&self, ops: Vec<Op>) -> Result<Vec<Vec<Op>>, StoreError> {
        let mut out: Vec<Vec<Op>> = Vec::new();
        let mut bytes = 0;
        for op in ops {
            let b = op_bytes(&op);
            if b > self.max_bytes {
                return Err(StoreError(format!(
                    "a value of {b} bytes exceeds the {}-byte etcd request limit",
                    self.max_bytes
                )));
            }
            match out.last_mut() {
                Some(c) if c.len() < self.max_ops && bytes + b <= self.max_bytes => {
                    bytes += b;
                    c.push(op);
                }
                _ => {
                    bytes = b;
                    out.push(vec![op]);
                }
            }
        }
        Ok(out)
    }

    /// Applies every committed journal and deletes every journal.
    pub(super) async fn settle_journals(&self) -> Result<(), StoreError> {
        let prefix = self.key(JOURNAL);
        let mut resp = self
            .kv_get(
                prefix.clone(),
                Some(GetOptions::new().with_range(prefix_end(&prefix))),
            )
            .await
            .map_err(|e| self.err(e))?;
        let mut journals: std::collections::BTreeMap<Vec<u8>, (bool, Vec<Vec<u8>>)> =
            Default::default();
        for kv in resp.take_kvs() {
            let rest = &kv.key()[prefix.len()..];
            let Some(slash) = rest.iter().position(|&c| c == b'/') else {
                continue;
            };
            let j = journals.entry(rest[..slash].to_vec()).or_default();
            if &rest[slash + 1..] == b"commit" {
                j.0 = true;
            } else {
                j.1.push(kv.value().to_vec()); // chunk keys sort in order
            }
        }
        for (id, (committed, chunks)) in journals {
            if committed {
                for chunk in &chunks {
                    let ops = decode(chunk)?;
                    self.write(Vec::new(), self.txn_ops(&ops)).await?;
                }
            }
            let mut jp = prefix.clone();
            jp.extend_from_slice(&id);
            jp.push(b'/');
            self.delete_journal(jp).await?;
            tracing::warn!(
                journal = %String::from_utf8_lossy(&id),
                committed,
                chunks = chunks.len(),
                "a batch interrupted by a crash was {}",
                if committed { "applied" } else { "dropped" }
            );
        }
        Ok(())
    }

    /// Deletes every key of one journal (`jp` ends with `ID/`).
    async fn delete_journal(&self, jp: Vec<u8>) -> Result<(), StoreError> {
        let delete = TxnOp::delete(jp, Some(DeleteOptions::new().with_prefix()));
        self.write(Vec::new(), vec![delete]).await.map(|_| ())
    }

    /// A batch bigger than one transaction: journal, commit marker, apply, clean up.
    pub(super) async fn journaled(&self, chunks: Vec<Vec<Op>>) -> Result<(), StoreError> {
        let id = format!(
            "{:016x}{:08x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            rand::random::<u32>()
        );
        let mut jp = self.key(JOURNAL);
        jp.extend_from_slice(id.as_bytes());
        jp.push(b'/');
        let at = |suffix: &str| {
            let mut k = jp.clone();
            k.extend_from_slice(suffix.as_bytes());
            k
        };
        for (i, c) in chunks.iter().enumerate() {
            self.write(
                Vec::new(),
                vec![TxnOp::put(at(&format!("{i:08x}")), encode(c), None)],
            )
            .await?;
        }
        self.write(Vec::new(), vec![TxnOp::put(at("commit"), Vec::new(), None)])
            .await?;
        for c in &chunks {
            self.write(Vec::new(), self.txn_ops(c)).await?;
        }
        self.delete_journal(jp).await
    }
}
