//! Leader election for cluster mode (`serve --store etcd`).
//!
//! Every coordinator replica on one etcd namespace campaigns on the election
//! `PREFIX + "leader"` with a lease of `ttl`, offering the address it serves on. One wins;
//! its **epoch** is the creation revision of its election key, and from then on every write
//! it makes is a transaction conditioned on that key still existing with that revision
//! (`EtcdBackend::fence`): once its lease is gone and a successor was elected, etcd
//! refuses what the old leader writes, however long it was paused or cut off.
//!
//! The leader renews its lease every `ttl / 6`, each try bounded by as much. If no renewal
//! was answered for `2/3 ttl` it stops acting as leader before etcd can expire the lease
//! (the server counts the TTL from a renewal no earlier than the one we sent): it stops
//! serving, counts a step-down, and campaigns again as a standby. Short, frequent tries
//! leave half the TTL for retries through other members after a renewal goes unanswered:
//! when the etcd member that was the raft leader dies, the others take one to two election
//! timeouts to elect a new one and answer no renewal meanwhile (one try's margin is not
//! enough there: `tests/failover.rs` kills etcd's raft leader under a 6 s lease).
//!
//! A standby binds the same ports, answers every call `UNAVAILABLE` naming the leader's
//! address, and reports NOT_SERVING on gRPC health, so clients and a Kubernetes Service
//! find the leader. On SIGTERM a leader resigns, so a standby takes over at once instead of
//! after the lease's TTL.

use crate::store::etcd::EtcdBackend;
use anyhow::{Context, Result};
use etcd_client::{Client, LeaderKey, ResignOptions};
use std::sync::{Arc, RwLock};

use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How a replica campaigns.
#[derive(Clone, Debug)]
pub struct ElectionConfig {
    /// Lease time-to-live: how long after its last renewal a silent leader keeps the lead
    /// on the server (it stops acting itself after two thirds of it).
    pub ttl: Duration,
    /// The address clients should use to reach this replica (shown by standbys while it
    /// leads); the gRPC listen address when not given.
    pub advertise: Option<String>,
    /// etcd's space quota (its `--quota-backend-bytes`); 0 skips the check that the
    /// retention window fits in half of it.
    pub quota_bytes: u64,
}

/// The leader's address as the standby last saw it (`None`: no leader elected).
#[derive(Clone, Debug, Default)]
pub struct LeaderAddr(Arc<RwLock<Option<String>>>);

impl LeaderAddr {
    fn set(&self, v: Option<String>) {
        *self.0.write().expect("leader address lock") = v;
    }

    /// What a standby tells callers.
    pub fn message(&self) -> String {
        match &*self.0.read().expect("leader address lock") {
            Some(a) => format!("this coordinator is a standby; the leader is at {a}"),
            None => "this coordinator is a standby; no leader is elected yet".into(),
        }
    }
}

/// An elected leadership.
pub struct Leadership {
    /// Creation revision of the election key: the fencing token.
    pub epoch: i64,
    key: LeaderKey,
    lease: i64,
    client: Client,
    /// Turns true when the lease could not be renewed in time.
    pub lost: watch::Receiver<bool>,
    keeper: tokio::task::JoinHandle<()>,
}

impl Leadership {
    /// The election key (the fence's subject).
    pub fn key(&self) -> Vec<u8> {
        self.key.key().to_vec()
    }

    /// Gives the lead up at once (graceful shutdown): resigns and revokes the lease.
    pub async fn resign(mut self) {
        self.keeper.abort();
        let opts = ResignOptions::new().with_leader(self.key.clone());
        if let Err(e) = self.client.resign(Some(opts)).await {
            tracing::warn!(error = %e, "resigning the leadership failed; a standby takes over when the lease expires");
        }
        let _ = self.client.lease_revoke(self.lease).await;
    }

    /// Stops renewing and revokes the lease if etcd still answers (within a second), so
    /// the next leader — this replica, campaigning again, among others — is not kept
    /// waiting behind its old key until the lease runs out.
    pub async fn abandon(mut self) {
        self.keeper.abort();
        let revoke = self.client.lease_revoke(self.lease);
        let _ = tokio::time::timeout(Duration::from_secs(1), revoke).await;
    }
}

/// The election's name under the store's namespace.
pub fn election_name(store: &EtcdBackend) -> Vec<u8> {
    let mut n = store.prefix().to_vec();
    n.extend_from_slice(b"leader");
    n
}

/// Grants a lease, keeps it alive, and campaigns until elected. While waiting, `leader`
/// follows the current leader's address (polled each second).
pub async fn campaign(
    store: &EtcdBackend,
    cfg: &ElectionConfig,
    advertise: String,
    leader: LeaderAddr,
) -> Result<Leadership> {
    let ttl_s = cfg.ttl.as_secs().max(2) as i64;
    let mut tries = 0;
    let lease = loop {
        let (mut client, member) = store.client();
        match client.lease_grant(ttl_s, None).await {
            Ok(r) => break r.id(),
            Err(e) if tries < 6 => {
                tries += 1;
                tracing::debug!(error = %e, "granting the leader lease failed; another member");
                store.next_member(member).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e).context("granting the leader lease"),
        }
    };
    let (lost_tx, lost) = watch::channel(false);
    let keeper = tokio::spawn(keep_alive(store.clone(), lease, cfg.ttl, lost_tx));
    let name = election_name(store);
    let poll = {
        let (store, name, leader) = (store.clone(), name.clone(), leader.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(r) = store.client().0.leader(name.clone()).await {
                    leader.set(
                        r.kv()
                            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                    );
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let mut lost_rx = lost.clone();
    // A campaign call ends at the client's request deadline while another replica leads;
    // it is repeated on the same lease (etcd keeps the candidate's key).
    let elected = loop {
        let (mut client, member) = store.client();
        let attempt = tokio::select! {
            r = client.campaign(name.clone(), advertise.clone(), lease) => r,
            _ = lost_rx.wait_for(|l| *l) => {
                poll.abort();
                keeper.abort();
                anyhow::bail!("the lease ran out while campaigning (etcd unreachable?)");
            }
        };
        match attempt {
            Ok(r) => match r.leader() {
                Some(k) => break k.clone(),
                None => anyhow::bail!("etcd answered a campaign without a leader key"),
            },
            Err(e) => {
                tracing::debug!(error = %e, "campaign call ended; campaigning again");
                if e.to_string().contains("connect") {
                    store.next_member(member).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    poll.abort();
    leader.set(Some(advertise));
    Ok(Leadership {
        epoch: elected.rev(),
        key: elected,
        lease,
        client: store.client().0,
        lost,
        keeper,
    })
}

/// Renews `lease` every `ttl / 6`; sets `lost` once no renewal was answered for `2/3 ttl`,
/// or etcd says the lease is gone.
async fn keep_alive(store: EtcdBackend, lease: i64, ttl: Duration, lost: watch::Sender<bool>) {
    let every = ttl / 6;
    let deadline = ttl * 2 / 3;
    let mut renewed = Instant::now();
    let mut stream = None;
    // When the first of the renewals now going unanswered was sent (warned once per spell).
    let mut failing: Option<Instant> = None;
    loop {
        let sent = Instant::now();
        let (mut client, member) = store.client();
        let answer = tokio::time::timeout(every, async {
            if stream.is_none() {
                stream = Some(client.lease_keep_alive(lease).await?);
            }
            let (keeper, responses) = stream.as_mut().expect("opened above");
            keeper.keep_alive().await?;
            responses.message().await
        })
        .await;
        let ok = match answer {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {
                if let Some(since) = failing.take() {
                    tracing::info!(lease, unanswered_for = ?since.elapsed(), "the leader lease is renewed again");
                }
                renewed = sent;
                true
            }
            Ok(Ok(Some(_))) => {
                tracing::error!(lease, "etcd says the leader lease expired");
                lost.send_replace(true);
                return;
            }
            failed => {
                metrics::counter!(crate::metrics::LEADER_LEASE_RENEWAL_FAILURES_TOTAL).increment(1);
                if failing.is_none() {
                    failing = Some(sent);
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(None)) => "etcd closed the renewal stream".to_string(),
                        _ => format!("no answer within {every:?}"),
                    };
                    tracing::warn!(lease, error = %why, "a renewal of the leader lease went unanswered; trying again through another member");
                }
                // The member we were talking to may be gone: the next try opens a new
                // stream through another one.
                stream = None;
                store.next_member(member).await;
                false
            }
        };
        if renewed.elapsed() >= deadline {
            tracing::error!(
                lease,
                silent_for = ?renewed.elapsed(),
                "the leader lease was not renewed in time"
            );
            lost.send_replace(true);
            return;
        }
        // After a failed renewal, try again soon (through another member): at least half
        // the TTL is left before the deadline.
        let pause = if ok {
            every
        } else {
            every.min(Duration::from_millis(250))
        };
        tokio::time::sleep_until(sent + pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::etcd::EtcdConfig;
    use crate::store::{Compare, KvBackend, Op};

    /// A leader whose election key is gone (its lease expired, a successor was elected)
    /// cannot write: plain batches and conditional writes are refused, the store says it
    /// was deposed, and etcd holds nothing of what it tried.
    #[test]
    fn writes_after_the_leadership_is_gone_are_fenced_off() {
        // Removed when the test passes (after the cluster, declared later, has stopped).
        let dir = kairos_tests::TempDir::new("fence");
        let Some(cluster) = kairos_tests::etcd::EtcdCluster::start(dir.path(), 1) else {
            return;
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let cfg = EtcdConfig {
                endpoints: cluster.endpoints.clone(),
                prefix: "/fence/".into(),
                ..Default::default()
            };
            let store = EtcdBackend::connect(&cfg).await.unwrap();
            let election = ElectionConfig {
                ttl: Duration::from_secs(5),
                advertise: None,
                quota_bytes: 0,
            };
            let leader = LeaderAddr::default();
            let l = campaign(&store, &election, "127.0.0.1:1".into(), leader.clone())
                .await
                .unwrap();
            assert!(l.epoch > 0);
            assert!(leader.message().contains("127.0.0.1:1"));
            let unfenced = store;
            let store = unfenced.fenced(l.key(), l.epoch);
            let put = |k: &str| Op::Put(k.as_bytes().to_vec(), b"v".to_vec());
            store.batch(vec![put("while-leader")]).await.unwrap();
            assert!(store
                .txn(
                    vec![Compare::Value(b"cas".to_vec(), None)],
                    vec![put("cas")]
                )
                .await
                .unwrap());
            // A business comparison that fails is still a plain `false`.
            assert!(!store
                .txn(
                    vec![Compare::Value(b"cas".to_vec(), None)],
                    vec![put("cas")]
                )
                .await
                .unwrap());
            assert!(!*store.deposed().borrow());
            // The key goes (as when the lease expires).
            store.client().0.delete(l.key(), None).await.unwrap();
            let e = store.batch(vec![put("after")]).await.unwrap_err();
            assert!(e.to_string().contains("leadership"), "{e}");
            assert!(*store.deposed().borrow());
            assert!(store
                .txn(vec![Compare::Value(b"x".to_vec(), None)], vec![put("x")])
                .await
                .is_err());
            assert_eq!(store.get(b"after".to_vec()).await.unwrap(), None);
            assert_eq!(store.get(b"x".to_vec()).await.unwrap(), None);
            assert!(store.get(b"while-leader".to_vec()).await.unwrap().is_some());
            let first_epoch = l.epoch;
            l.abandon().await;

            // The same process elected again: the new term writes, and a task of the old
            // term that is still finishing stays fenced off (its handle keeps the old fence).
            let again = campaign(&unfenced, &election, "127.0.0.1:1".into(), leader)
                .await
                .unwrap();
            assert!(again.epoch > first_epoch);
            let term2 = unfenced.fenced(again.key(), again.epoch);
            assert!(!*term2.deposed().borrow());
            term2.batch(vec![put("second-term")]).await.unwrap();
            let e = store.batch(vec![put("lingering")]).await.unwrap_err();
            assert!(e.to_string().contains("leadership"), "{e}");
            assert_eq!(store.get(b"lingering".to_vec()).await.unwrap(), None);
            assert!(term2.get(b"second-term".to_vec()).await.unwrap().is_some());
            again.abandon().await;
        });
    }
}
