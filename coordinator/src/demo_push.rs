//! WebSub push in `standalone --demo` (`--demo-hub-share`): the farm's hub serves a share
//! of the feeds, the coordinator listens for it on loopback, and the summary measures what
//! push did — how soon pushed postings reached the store, how often the hub's feeds were
//! still polled, and (with `--demo-hub-silent-after-days`) how soon those feeds went back
//! to full polling once the hub fell silent.

use anyhow::{Context, Result};
use kairos_coordinator::hub::Hub;
use kairos_coordinator::store::KvBackend;
use kairos_coordinator::time::DAY_MS;
use kairos_farm::farm::Farm;
use kairos_farm::hub::{HubFaults, RunningHub, TestHub};
use std::sync::Arc;

/// The demo's hub.
pub struct DemoHub {
    /// The running hub (stops when dropped).
    pub _running: RunningHub,
    /// Which feeds (by farm index) name it.
    pub on_hub: Vec<bool>,
    /// When it falls silent (simulated Unix ms), if it does.
    pub silent_from_ms: Option<i64>,
    /// The fetches a day the first plan gave each of the hub's feeds (before any was
    /// subscribed: their allocation without push).
    pub first_planned: std::sync::Mutex<Option<f64>>,
    /// Each feed's fetches when the subscriptions had settled (half a day in), and when.
    pub settled: std::sync::Mutex<Option<(i64, std::collections::BTreeMap<String, u64>)>>,
}

/// Starts the hub for `share` of the farm's feeds (at `urls`), silent from
/// `silent_after_days` after now if given.
pub async fn start(
    farm: &Arc<Farm>,
    urls: &[String],
    share: f64,
    seed: u64,
    silent_after_days: Option<f64>,
) -> Result<DemoHub> {
    let on_hub = kairos_farm::hub::pick(urls.len(), share.clamp(0.0, 1.0), seed);
    let now = farm.clock().now_ms();
    // Any number given: NaN reads as now, a huge one as never.
    let silent_from_ms =
        silent_after_days.map(|d| now.saturating_add((d.max(0.0) * DAY_MS as f64) as i64));
    let running = TestHub::start(
        farm.clone(),
        urls,
        on_hub.clone(),
        HubFaults {
            silent_from_ms,
            ..HubFaults::default()
        },
    )
    .await
    .context("starting the demo's WebSub hub")?;
    println!(
        "demo: {} of {} feeds name a WebSub hub at {}{}",
        on_hub.iter().filter(|&&h| h).count(),
        urls.len(),
        running.url,
        silent_from_ms
            .map(|_| format!(
                ", silent after {:.2} simulated days",
                silent_after_days.unwrap_or(0.0)
            ))
            .unwrap_or_default()
    );
    Ok(DemoHub {
        _running: running,
        on_hub,
        silent_from_ms,
        first_planned: Default::default(),
        settled: Default::default(),
    })
}

/// Fetches a day the plan gives the hub's feeds and the others, per feed, noted for the
/// summary: the first plan's, and each feed's fetches once half a day has passed.
pub async fn observe<B: KvBackend>(hub: &Hub<B>, d: &DemoHub, start_ms: i64) -> (f64, f64) {
    let (on, off) = planned(hub, d).await;
    if on > 0.0 {
        d.first_planned.lock().expect("demo hub").get_or_insert(on);
    }
    let now = hub.clock().now_ms();
    if now >= start_ms + DAY_MS / 2 && d.settled.lock().expect("demo hub").is_none() {
        let counts = hub.totals().await.fetches_per_feed;
        d.settled
            .lock()
            .expect("demo hub")
            .get_or_insert((now, counts.into_iter().collect()));
    }
    (on, off)
}

/// Fetches a day the plan gives the hub's feeds and the others, per feed.
pub async fn planned<B: KvBackend>(hub: &Hub<B>, d: &DemoHub) -> (f64, f64) {
    let (mut on, mut off, mut n_on, mut n_off) = (0.0, 0.0, 0usize, 0usize);
    for (i, &h) in d.on_hub.iter().enumerate() {
        let per_day = hub
            .inspect(&format!("farm-{i}"))
            .await
            .map_or(0.0, |v| v.fetches_per_day);
        if h {
            on += per_day;
            n_on += 1;
        } else {
            off += per_day;
            n_off += 1;
        }
    }
    (on / n_on.max(1) as f64, off / n_off.max(1) as f64)
}

/// The summary's `push` section: for the hub's feeds, the delay of postings published while
/// it delivered (from half a day after the start, when the subscriptions have settled, to
/// its silence) and after its silence, and how often they and the others were fetched.
pub async fn summary<B: KvBackend>(
    hub: &Hub<B>,
    farm: &Farm,
    d: &DemoHub,
    start_ms: i64,
    now_ms: i64,
) -> Result<serde_json::Value> {
    let t = hub.totals().await;
    let days = ((now_ms - start_ms) as f64 / DAY_MS as f64).max(1e-9);
    let settled = start_ms + DAY_MS / 2;
    let silent = d.silent_from_ms.unwrap_or(i64::MAX);
    let (mut delivering, mut after_silence) = (Vec::new(), Vec::new());
    let (mut polls_on, mut polls_off, mut n_on, mut n_off) = (0u64, 0u64, 0usize, 0usize);
    for f in farm.feeds() {
        let id = format!("farm-{}", f.index);
        let polls = t.fetches_per_feed.get(&id).copied().unwrap_or(0);
        if !d.on_hub.get(f.index).copied().unwrap_or(false) {
            polls_off += polls;
            n_off += 1;
            continue;
        }
        polls_on += polls;
        n_on += 1;
        let mut cursor = String::new();
        loop {
            let page = hub.ingestor().list(&id, &cursor, 1000).await?;
            if page.postings.is_empty() {
                break;
            }
            for p in &page.postings {
                let Some(published) = p.published_unix_ms else {
                    continue;
                };
                let delay_s = (p.discovered_unix_ms - published) as f64 / 1000.0;
                if published >= settled && published < silent {
                    delivering.push(delay_s);
                } else if published >= silent {
                    after_silence.push(delay_s);
                }
            }
            cursor = page.next_cursor;
        }
    }
    let (planned_on, planned_off) = planned(hub, d).await;
    // Fetches a day of each group from half a day in to the end.
    let since = d.settled.lock().expect("demo hub").clone();
    let settled_rates = since.map(|(at, before)| {
        let days = ((now_ms - at) as f64 / DAY_MS as f64).max(1e-9);
        let (mut on, mut off) = (0u64, 0u64);
        for (i, &h) in d.on_hub.iter().enumerate() {
            let id = format!("farm-{i}");
            let n = t.fetches_per_feed.get(&id).copied().unwrap_or(0)
                - before.get(&id).copied().unwrap_or(0);
            if h {
                on += n;
            } else {
                off += n;
            }
        }
        (
            on as f64 / n_on.max(1) as f64 / days,
            off as f64 / n_off.max(1) as f64 / days,
        )
    });
    let first = *d.first_planned.lock().expect("demo hub");
    let ids: Vec<String> = d
        .on_hub
        .iter()
        .enumerate()
        .filter(|(_, &h)| h)
        .map(|(i, _)| format!("farm-{i}"))
        .collect();
    Ok(serde_json::json!({
        "hub_feed_ids": ids,
        "hub_feeds": n_on,
        "other_feeds": n_off,
        "delivering": quantiles(&mut delivering),
        "after_silence": quantiles(&mut after_silence),
        "hub_feeds_fetches_per_feed_per_day": polls_on as f64 / n_on.max(1) as f64 / days,
        "other_feeds_fetches_per_feed_per_day": polls_off as f64 / n_off.max(1) as f64 / days,
        "hub_feeds_planned_fetches_per_day_at_end": planned_on,
        "hub_feeds_planned_fetches_per_day_first_plan": first,
        "hub_feeds_fetches_per_feed_per_day_from_half_a_day": settled_rates.map(|r| r.0),
        "other_feeds_fetches_per_feed_per_day_from_half_a_day": settled_rates.map(|r| r.1),
        "other_feeds_planned_fetches_per_day_at_end": planned_off,
    }))
}

/// Count, mean, median, p99 and max of delays in seconds.
fn quantiles(v: &mut [f64]) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::json!({ "postings": 0 });
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    serde_json::json!({
        "postings": v.len(),
        "mean_seconds": v.iter().sum::<f64>() / v.len() as f64,
        "median_seconds": q(0.5),
        "p99_seconds": q(0.99),
        "max_seconds": v[v.len() - 1],
    })
}
