//! The last plan, kept in the store, so that a new leader (after a failover or a restart)
//! hands workers fetch times as soon as it has read the registry, instead of after its
//! first full round: at 100,000 feeds on two cores that round takes a minute or more, and
//! until it ends the whole control plane was down.
//!
//! A plan is periodic (offsets within a period from an origin), so a stored one stays a
//! valid schedule for as long as the feeds it names are registered (their URLs are read
//! from the registry, not stored twice); it only lacks what was
//! learned since it was written. It is written every `--plan-snapshot-interval` (not every
//! round: at 100k feeds it is about 11 MB, and etcd keeps every overwritten value until its
//! next compaction), in chunks of [`CHUNK`] feeds under a fresh generation; the meta key
//! that names the generation is written last, and the previous generation's chunks are
//! deleted after it, so a leader that dies mid-write leaves the previous plan whole.

use crate::control::FeedSpec;
use crate::registry::FeedRecord;
use crate::store::keys::Key;
use crate::store::{KvBackend, Op, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Feeds per chunk: about 150 KB of JSON, well under etcd's 1.5 MiB request limit.
pub const CHUNK: usize = 2_000;

/// Which generation of the stored plan is whole, and what it was made for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Generation of the chunks (one more than the previous plan's).
    pub generation: u64,
    /// Chunks written, numbered from 0.
    pub chunks: u32,
    /// Feeds in the plan.
    pub feeds: u64,
    /// Fetches a day the plan was made for (what the workers' allowances deal).
    pub per_day: f64,
    /// When it was written, Unix ms on the run's clock.
    pub written_at_ms: i64,
    /// The plans' record of delivered against promised delay when it was written
    /// (absent in plans stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promises: Option<crate::control::promise::PromiseRecord>,
    /// A weekly plan's days' prices, in weighted cost per period per fetch (empty for a
    /// daily plan, and in plans stored before they were kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub day_prices: Vec<f64>,
    /// The feeds' spread of those prices.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub day_price_spread: f64,
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

impl Meta {
    /// The days' prices the plan was solved at, as the planner takes them.
    pub fn day_pricing(&self) -> crate::plan::planner::DayPricing {
        crate::plan::planner::DayPricing {
            prices: self.day_prices.clone(),
            spread: self.day_price_spread,
        }
    }
}

/// One feed's fetch times, compactly: milliseconds instead of fractional seconds, and the
/// fields that are usually zero left out.
#[derive(Serialize, Deserialize)]
struct Entry {
    #[serde(rename = "i")]
    id: String,
    /// Period, ms.
    #[serde(rename = "p")]
    period_ms: i64,
    /// Origin, Unix ms.
    #[serde(rename = "o")]
    origin_ms: i64,
    /// Offsets within the period, ms.
    #[serde(rename = "t")]
    offsets_ms: Vec<i64>,
    #[serde(rename = "nb", default, skip_serializing_if = "is_zero")]
    not_before_ms: i64,
    #[serde(rename = "ff", default, skip_serializing_if = "is_zero")]
    first_fetch_ms: i64,
    #[serde(rename = "sh", default, skip_serializing_if = "is_zero32")]
    skip_hours: u32,
    #[serde(rename = "sd", default, skip_serializing_if = "is_zero32")]
    skip_days: u32,
    #[serde(rename = "tm", default, skip_serializing_if = "is_false")]
    timed: bool,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

impl Entry {
    fn of(s: &FeedSpec) -> Entry {
        Entry {
            id: s.id.clone(),
            period_ms: (s.period_seconds * 1000.0).round() as i64,
            origin_ms: s.origin_unix_ms,
            offsets_ms: s
                .offsets_seconds
                .iter()
                .map(|o| (o * 1000.0).round() as i64)
                .collect(),
            not_before_ms: s.not_before_unix_ms,
            first_fetch_ms: s.first_fetch_unix_ms,
            skip_hours: s.skip_hours,
            skip_days: s.skip_days,
            timed: s.timed,
        }
    }

    /// The spec of `feed` as registered now (its URL and host may have changed since).
    fn spec(self, feed: &FeedRecord) -> FeedSpec {
        FeedSpec {
            id: self.id,
            url: feed.url.clone(),
            host: feed.host.clone(),
            offsets_seconds: self.offsets_ms.iter().map(|&o| o as f64 / 1000.0).collect(),
            period_seconds: self.period_ms as f64 / 1000.0,
            origin_unix_ms: self.origin_ms,
            not_before_unix_ms: self.not_before_ms,
            first_fetch_unix_ms: self.first_fetch_ms,
            skip_hours: self.skip_hours,
            skip_days: self.skip_days,
            timed: self.timed,
        }
    }
}

/// A plan encoded for the store: its chunks, in order (CPU work: run it off the runtime).
pub fn encode(specs: &BTreeMap<String, FeedSpec>) -> Vec<Vec<u8>> {
    let entries: Vec<Entry> = specs.values().map(Entry::of).collect();
    entries
        .chunks(CHUNK)
        .map(|c| serde_json::to_vec(c).expect("plain data serializes"))
        .collect()
}

/// Writes `chunks` as the stored plan made for `per_day` fetches a day at `now_ms` and
/// the days' prices `days`, with the plans' record as it stands, and drops the plan it
/// replaces.
pub async fn write<B: KvBackend + ?Sized>(
    store: &B,
    chunks: Vec<Vec<u8>>,
    feeds: usize,
    per_day: f64,
    now_ms: i64,
    promises: crate::control::promise::PromiseRecord,
    days: &crate::plan::planner::DayPricing,
) -> Result<Meta, StoreError> {
    let key = |k: Key| k.encode().map_err(|e| StoreError(e.to_string()));
    let previous = read_meta(store).await?;
    let meta = Meta {
        generation: previous.as_ref().map_or(1, |m| m.generation + 1),
        chunks: chunks.len() as u32,
        feeds: feeds as u64,
        per_day,
        written_at_ms: now_ms,
        promises: Some(promises),
        day_prices: days.prices.clone(),
        day_price_spread: days.spread,
    };
    if previous.is_none() {
        // No plan is named (a first write, or an unreadable meta): chunks left by a writer
        // that died before naming them, or by the unreadable meta's plan, would stay for
        // ever.
        let all = Key::PlanChunk(0, 0).prefix_of_kind();
        loop {
            let page = store.range(all.clone(), None, 64).await?;
            if page.is_empty() {
                break;
            }
            store
                .batch(page.into_iter().map(|(k, _)| Op::Delete(k)).collect())
                .await?;
        }
    }
    // One chunk per write keeps each request well under etcd's size limit.
    for (i, c) in chunks.into_iter().enumerate() {
        store
            .batch(vec![Op::Put(
                key(Key::PlanChunk(meta.generation, i as u32))?,
                c,
            )])
            .await?;
    }
    let body = serde_json::to_vec(&meta).expect("plain data serializes");
    store
        .batch(vec![Op::Put(key(Key::PlanMeta)?, body)])
        .await?;
    if let Some(old) = previous {
        let mut ops = Vec::new();
        for i in 0..old.chunks {
            ops.push(Op::Delete(key(Key::PlanChunk(old.generation, i))?));
        }
        for part in ops.chunks(64) {
            store.batch(part.to_vec()).await?;
        }
    }
    Ok(meta)
}

async fn read_meta<B: KvBackend + ?Sized>(store: &B) -> Result<Option<Meta>, StoreError> {
    let k = Key::PlanMeta
        .encode()
        .map_err(|e| StoreError(e.to_string()))?;
    Ok(match store.get(k).await? {
        Some(v) => match serde_json::from_slice(&v) {
            Ok(m) => Some(m),
            Err(e) => {
                // The next write replaces it; until then there is no stored plan.
                tracing::warn!(error = %e, "stored plan's meta unreadable; ignored");
                None
            }
        },
        None => None,
    })
}

/// The stored plan, restricted to `feeds` as registered now (feeds removed since are left
/// out; URLs and hosts are the registry's: the plan stores fetch times only); `None` when
/// there is none, or when a chunk is missing or unreadable (logged: the first round plans
/// afresh).
pub async fn load<B: KvBackend + ?Sized>(
    store: &B,
    feeds: &[FeedRecord],
) -> Result<Option<(Meta, BTreeMap<String, FeedSpec>)>, StoreError> {
    let Some(meta) = read_meta(store).await? else {
        return Ok(None);
    };
    let keys = (0..meta.chunks)
        .map(|i| Key::PlanChunk(meta.generation, i).encode())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StoreError(e.to_string()))?;
    let registered: HashMap<&str, &FeedRecord> = feeds.iter().map(|f| (f.id.as_str(), f)).collect();
    let mut specs = BTreeMap::new();
    for (p, part) in keys.chunks(16).enumerate() {
        for (i, v) in store.get_many(part.to_vec()).await?.into_iter().enumerate() {
            let Some(v) = v else {
                tracing::warn!(
                    generation = meta.generation,
                    chunk = p * 16 + i,
                    "stored plan incomplete; the first round plans afresh"
                );
                return Ok(None);
            };
            let entries: Vec<Entry> = match serde_json::from_slice(&v) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "stored plan unreadable; the first round plans afresh");
                    return Ok(None);
                }
            };
            for e in entries {
                if let Some(feed) = registered.get(e.id.as_str()) {
                    specs.insert(e.id.clone(), e.spec(feed));
                }
            }
        }
    }
    Ok(Some((meta, specs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;

    fn spec(i: usize) -> FeedSpec {
        FeedSpec {
            id: format!("f{i:06}"),
            url: format!("http://127.0.0.{}:80/{i}", i % 200 + 1),
            host: format!("127.0.0.{}:80", i % 200 + 1),
            offsets_seconds: vec![0.0, 3600.5, 43_200.25 + i as f64],
            period_seconds: 86_400.0,
            origin_unix_ms: 1_700_000_000_000,
            not_before_unix_ms: if i.is_multiple_of(7) {
                1_700_000_100_000
            } else {
                0
            },
            first_fetch_unix_ms: if i.is_multiple_of(5) {
                1_700_000_200_000
            } else {
                0
            },
            skip_hours: (i % 3) as u32,
            skip_days: 0,
            timed: i.is_multiple_of(4),
        }
    }

    fn record(s: &FeedSpec) -> FeedRecord {
        FeedRecord {
            id: s.id.clone(),
            url: s.url.clone(),
            host: s.host.clone(),
            weight: 1.0,
        }
    }

    #[tokio::test]
    async fn a_plan_comes_back_as_written_less_the_feeds_gone_or_moved() {
        let store = MemoryBackend::new();
        assert!(load(&store, &[]).await.unwrap().is_none(), "nothing stored");
        let n = CHUNK * 2 + 17;
        let specs: BTreeMap<String, FeedSpec> =
            (0..n).map(spec).map(|s| (s.id.clone(), s)).collect();
        let mut feeds: Vec<FeedRecord> = specs.values().map(record).collect();
        // The plans' record travels with the plan.
        let mut record = crate::control::promise::PromiseRecord::default();
        for _ in 0..80 {
            record.add(5, &[1_500_000], 600.0);
        }
        // So do a weekly plan's days' prices.
        let days = crate::plan::planner::DayPricing {
            prices: vec![0.0, 12.5, 3.25, 0.125, 7.0, 1.0e-3, 40.0],
            spread: 2.5,
        };
        let m1 = write(&store, encode(&specs), n, 4.0 * n as f64, 5, record, &days)
            .await
            .unwrap();
        assert_eq!((m1.generation, m1.chunks, m1.feeds), (1, 3, n as u64));
        let (meta, back) = load(&store, &feeds).await.unwrap().unwrap();
        assert_eq!(meta, m1);
        assert_eq!(meta.promises.map(|r| r.ratio()), Some(record.ratio()));
        assert!(record.ratio() > 1.0);
        assert_eq!(meta.day_pricing(), days);
        // A meta written before the record or the prices were kept still reads, without.
        let old: Meta = serde_json::from_str(
            r#"{"generation":1,"chunks":0,"feeds":0,"per_day":1.0,"written_at_ms":5}"#,
        )
        .unwrap();
        assert_eq!(old.promises, None);
        assert_eq!(old.day_pricing(), Default::default());
        assert_eq!(back, specs, "milliseconds keep these offsets exactly");

        // A second plan replaces the first, whose chunks go.
        let m2 = write(
            &store,
            encode(&specs),
            n,
            1.0,
            6,
            Default::default(),
            &Default::default(),
        )
        .await
        .unwrap();
        assert_eq!(m2.generation, 2);
        let (meta, _) = load(&store, &feeds).await.unwrap().unwrap();
        assert!(meta.day_prices.is_empty(), "a daily plan stores none");
        let old = Key::PlanChunk(1, 0).prefix().unwrap();
        assert!(store.range(old, None, 10).await.unwrap().is_empty());

        // One feed removed: it is not served; one moved to another URL: fetched there.
        feeds.remove(3);
        feeds[10].url = "http://127.0.0.1:81/elsewhere".into();
        feeds[10].host = "127.0.0.1:81".into();
        let (_, back) = load(&store, &feeds).await.unwrap().unwrap();
        assert_eq!(back.len(), n - 1);
        assert!(!back.contains_key(&specs.values().nth(3).unwrap().id));
        let moved = &back[&feeds[10].id];
        assert_eq!(
            (moved.url.as_str(), moved.host.as_str()),
            ("http://127.0.0.1:81/elsewhere", "127.0.0.1:81")
        );
        assert_eq!(moved.offsets_seconds, specs[&feeds[10].id].offsets_seconds);
    }

    /// Registers feeds `f0`… on four hosts.
    async fn add_feeds(hub: &crate::hub::Hub<MemoryBackend>, n: usize) {
        for i in 0..n {
            let url = format!("http://h{}.invalid/f{i}", i % 4);
            hub.registry()
                .add_feed(Some(&format!("f{i}")), &url, 1.0)
                .await
                .unwrap();
        }
    }

    /// What a failover does: the next leader's hub, opened on the store the last one wrote
    /// its plan to, hands out that plan's fetch times and deals the day's budget before any
    /// round of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_leader_serves_the_stored_plan_before_its_first_round() {
        use kairos_runtime::clock::SimClock;
        use std::sync::Arc;
        let store = Arc::new(MemoryBackend::new());
        let clock = SimClock::manual(1_700_000_000_000);
        let first = crate::hub::open_for_tests(store.clone(), clock).await;
        assert_eq!(first.started_on_stored_plan(), None);
        add_feeds(&first, 30).await;
        let outcome = first.replan().await.unwrap();
        let chunks = encode(&outcome.specs);
        // A record that says the plans delivered 1.5 times their promise.
        let mut record = crate::control::promise::PromiseRecord::default();
        for _ in 0..1_000 {
            record.add(clock.now_ms(), &[900_000], 600.0);
        }
        write(
            store.as_ref(),
            chunks,
            30,
            outcome.budget_per_day,
            clock.now_ms(),
            record,
            &outcome.day_prices,
        )
        .await
        .unwrap();
        drop(first);

        let next = crate::hub::open_for_tests(store.clone(), clock).await;
        assert_eq!(next.started_on_stored_plan(), Some((30, clock.now_ms())));
        for (id, spec) in &outcome.specs {
            let served = next.feed_spec(id).await.expect("served from the store");
            assert_eq!(served.url, spec.url);
            assert_eq!(served.period_seconds, spec.period_seconds);
            assert_eq!(served.offsets_seconds.len(), spec.offsets_seconds.len());
            for (a, b) in served.offsets_seconds.iter().zip(&spec.offsets_seconds) {
                assert!((a - b).abs() <= 0.0005, "{id}: {a} against {b}");
            }
        }
        let (w, _) = next.register("w", 1.0).await.unwrap();
        let allowance = next.allowance(&w).await.expect("the day's budget is dealt");
        assert!(allowance.fetches > 0, "{allowance:?}");
        assert_eq!(next.serving_stored_plan().await, Some((30, clock.now_ms())));
        next.replan().await.unwrap();
        assert_eq!(next.serving_stored_plan().await, None, "its own plan now");
        // Its promise goes on from its predecessor's record.
        let figures = next.totals().await.last_plan.expect("a plan");
        assert!((figures.promise_ratio - record.ratio()).abs() < 1e-12);
        assert!(figures.promise_ratio > 1.4, "{}", figures.promise_ratio);
    }

    /// A weekly plan's days' prices outlive their leader: the next one plans its first
    /// round at them rather than unpriced; a leader of daily plans has no use for them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_leader_plans_a_week_at_its_predecessors_day_prices() {
        use crate::control::relearn::PlannerSettings;
        use crate::hub::messages as msg;
        use crate::hub::test_support::{open_for_tests, open_with_planner_for_tests};
        use crate::plan::planner::DayPricing;
        use kairos_runtime::clock::SimClock;
        use std::sync::Arc;
        let store = Arc::new(MemoryBackend::new());
        let clock = SimClock::manual(1_700_000_000_000);
        let weekly = PlannerSettings {
            weekly: true,
            ..Default::default()
        };
        let first = open_with_planner_for_tests(store.clone(), clock, weekly.clone()).await;
        add_feeds(&first, 30).await;
        let outcome = first.replan().await.unwrap();
        assert_eq!(outcome.specs.len(), 30);
        let days = DayPricing {
            prices: vec![0.0, 3.0, 1.0, 0.0, 2.0, 0.5, 0.25],
            spread: 0.1,
        };
        write(
            store.as_ref(),
            encode(&outcome.specs),
            30,
            outcome.budget_per_day,
            clock.now_ms(),
            Default::default(),
            &days,
        )
        .await
        .unwrap();
        drop(first);

        let prices_of = |hub: crate::hub::Hub<MemoryBackend>| async move {
            let parked = hub.actor.ask(msg::TakeReplanner).await.expect("parked");
            parked.replanner.day_prices().clone()
        };
        let next = open_with_planner_for_tests(store.clone(), clock, weekly).await;
        assert_eq!(next.started_on_stored_plan(), Some((30, clock.now_ms())));
        assert_eq!(prices_of(next).await, days);
        let daily = open_for_tests(store.clone(), clock).await;
        assert_eq!(prices_of(daily).await, DayPricing::default());
    }

    #[tokio::test]
    async fn a_plan_missing_a_chunk_is_not_served() {
        let store = MemoryBackend::new();
        let specs: BTreeMap<String, FeedSpec> = (0..CHUNK + 1)
            .map(spec)
            .map(|s| (s.id.clone(), s))
            .collect();
        let feeds: Vec<FeedRecord> = specs.values().map(record).collect();
        let daily = crate::plan::planner::DayPricing::default();
        let write_at = |now_ms| {
            write(
                &store,
                encode(&specs),
                specs.len(),
                1.0,
                now_ms,
                Default::default(),
                &daily,
            )
        };
        write_at(5).await.unwrap();
        store
            .batch(vec![Op::Delete(Key::PlanChunk(1, 1).encode().unwrap())])
            .await
            .unwrap();
        assert!(load(&store, &feeds).await.unwrap().is_none());
        store
            .batch(vec![Op::Put(
                Key::PlanMeta.encode().unwrap(),
                b"{".to_vec(),
            )])
            .await
            .unwrap();
        assert!(load(&store, &feeds).await.unwrap().is_none());
        // The next write, with no readable meta, clears what the unnamed plans left.
        let m = write_at(6).await.unwrap();
        assert_eq!(m.generation, 1);
        let all = Key::PlanChunk(0, 0).prefix_of_kind();
        assert_eq!(store.range(all, None, 100).await.unwrap().len(), 2);
        assert_eq!(load(&store, &feeds).await.unwrap().unwrap().1, specs);
    }
}
