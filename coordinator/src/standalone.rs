//! `standalone`: the coordinator, its gRPC server and N workers in one process, talking
//! over loopback gRPC exactly as a cluster does. `--demo` also serves a synthetic feed farm
//! and simulated readers on a time-compressed clock, prints a summary every simulated hour,
//! and compares the realized delay with uniform polling at the same budget on the same
//! postings.

use crate::demo;
use crate::live::StandaloneArgs;
use anyhow::{bail, Context, Result};
use kairos_coordinator::hub::Hub;
use kairos_coordinator::registry::{Registry, RegistryError};
use kairos_coordinator::server::{self as serve, Running, ServerOptions};
use kairos_coordinator::store::embedded::EmbeddedBackend;
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_coordinator::store::KvBackend;
use kairos_coordinator::time::DAY_MS;
use kairos_farm::farm::{Farm, FarmConfig, RunningFarm};
use kairos_runtime::clock::SimClock;
use kairos_worker::agent::{self, AgentConfig, AgentStats};
use kairos_worker::fetch::FetchConfig;
use kairos_worker::target::TargetPolicy;
use rand::SeedableRng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Feeds each simulated reader subscribes to.
const SUBSCRIPTIONS_PER_READER: usize = 8;
/// Accesses per reader per day.
const READS_PER_DAY: f64 = 6.0;

/// Runs `standalone`.
pub fn run(a: StandaloneArgs) -> Result<()> {
    kairos_runtime::process::init_tracing();
    kairos_runtime::listener::raise_open_file_limit();
    if a.workers == 0 || a.workers > 64 {
        bail!("--workers must be between 1 and 64");
    }
    // Standalone serves without credentials, so only this machine may reach it.
    if !a.listen.ip().is_loopback() {
        bail!(
            "standalone serves without credentials, so it listens on loopback only; {} is not loopback (use `serve --tokens` to serve a network)",
            a.listen
        );
    }
    let clock = a.clock.clock(if a.demo { 1440.0 } else { 1.0 })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        match a.data_dir.clone() {
            Some(dir) => {
                let store = EmbeddedBackend::open(&dir)
                    .with_context(|| format!("opening the store in {}", dir.display()))?;
                run_with(Arc::new(store), a, clock).await
            }
            None => run_with(Arc::new(MemoryBackend::new()), a, clock).await,
        }
    })
}

/// The farm of a demo run and when the run started.
struct DemoFarm {
    farm: Arc<Farm>,
    _serving: RunningFarm,
    start_ms: i64,
    /// The WebSub hub of `--demo-hub-share`.
    hub: Option<crate::demo_push::DemoHub>,
}

/// Ignores "already exists" (a restarted run on the same data dir), fails on the rest.
fn tolerate_existing<T>(r: Result<T, RegistryError>) -> Result<()> {
    match r {
        Ok(_) | Err(RegistryError::AlreadyExists(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn setup_demo<B: KvBackend>(
    store: &Arc<B>,
    a: &StandaloneArgs,
    clock: SimClock,
) -> Result<DemoFarm> {
    let run_days = a
        .run_for
        .map(|d| Duration::from(d).as_secs_f64() * clock.scale() / 86_400.0)
        .unwrap_or(30.0);
    let farm = Arc::new(Farm::generate(
        FarmConfig {
            feeds: a.demo_feeds.max(1),
            hosts: a.demo_hosts.clamp(1, 250),
            mean_posts_per_day: 4.0,
            days: run_days + 1.0,
            history_days: 2.0,
            items_per_doc: 20,
            pad_bytes: 200,
            seed: a.demo_seed,
            faults: Default::default(),
        },
        clock,
    ));
    let serving = farm
        .clone()
        .serve()
        .await
        .context("serving the demo feed farm on loopback")?;
    // Started before any feed is fetched, so the feeds name it from their first document.
    let hub = if a.demo_hub_share > 0.0 {
        Some(
            crate::demo_push::start(
                &farm,
                &serving.urls,
                a.demo_hub_share,
                a.demo_seed,
                a.demo_hub_silent_after_days,
            )
            .await?,
        )
    } else {
        None
    };
    // The demo's farm is ours, on loopback.
    let registry = Registry::new(store.clone()).with_private_allowed(vec![loopback()]);
    for (i, url) in serving.urls.iter().enumerate() {
        let id = format!("farm-{i}");
        match registry.add_feed(Some(&id), url, 1.0).await {
            Ok(_) => {}
            // A rerun on the same data dir: the farm listens on new ports.
            Err(RegistryError::AlreadyExists(_)) => {
                registry.set_feed_url(&id, url).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.demo_seed ^ 0x5eed);
    for u in 0..a.demo_users {
        let user = format!("reader-{u}");
        tolerate_existing(registry.add_user(&user, 1.0).await)?;
        for f in rand::seq::index::sample(
            &mut rng,
            serving.urls.len(),
            SUBSCRIPTIONS_PER_READER.min(serving.urls.len()),
        ) {
            tolerate_existing(registry.subscribe(&user, &format!("farm-{f}")).await)?;
        }
    }
    println!(
        "demo: {} feeds on {} loopback hosts, {} readers, clock x{} (one simulated day per {:.0} s)",
        serving.urls.len(),
        serving.hosts.len(),
        a.demo_users,
        clock.scale(),
        86_400.0 / clock.scale()
    );
    Ok(DemoFarm {
        farm,
        _serving: serving,
        start_ms: clock.now_ms(),
        hub,
    })
}

/// Loopback IPv4, which the demo's farm listens on.
fn loopback() -> ipnet::IpNet {
    "127.0.0.0/8".parse().expect("valid network")
}

/// Registers the feeds of a URL list or OPML file; URLs naming non-public IP literals are
/// taken only inside `allowed` (`--allow-private`), as at AddFeed.
async fn register_feed_file<B: KvBackend>(
    store: &Arc<B>,
    path: &std::path::Path,
    allowed: &[ipnet::IpNet],
) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the feed list {}", path.display()))?;
    let registry = Registry::new(store.clone()).with_private_allowed(allowed.to_vec());
    if text.trim_start().starts_with('<') {
        let r = registry
            .import_opml(&text, None)
            .await
            .with_context(|| format!("importing {}", path.display()))?;
        for s in &r.skipped {
            tracing::warn!(file = %path.display(), reason = %s, "outline skipped");
        }
        println!(
            "feeds: {} added, {} already present, {} outlines skipped",
            r.feeds_added,
            r.feeds_already_present,
            r.skipped.len()
        );
        return Ok(());
    }
    let (mut added, mut skipped) = (0, 0);
    for (n, line) in text.lines().enumerate() {
        let url = line.split('#').next().unwrap_or("").trim();
        if url.is_empty() {
            continue;
        }
        match registry.add_feed(None, url, 1.0).await {
            Ok(_) => added += 1,
            Err(RegistryError::AlreadyExists(_)) => {}
            Err(e @ RegistryError::InvalidArgument(_)) => {
                skipped += 1;
                tracing::warn!(file = %path.display(), line = n + 1, error = %e, "feed skipped");
            }
            Err(e) => return Err(e.into()),
        }
    }
    println!("feeds: {added} added, {skipped} lines skipped");
    Ok(())
}

async fn run_with<B: KvBackend>(store: Arc<B>, a: StandaloneArgs, clock: SimClock) -> Result<()> {
    let demo = if a.demo {
        Some(setup_demo(&store, &a, clock).await?)
    } else {
        let path = a.feeds.as_deref().expect("clap requires --feeds");
        register_feed_file(&store, path, &a.allow_private).await?;
        None
    };
    let host_gap = a.plan.host_gap_or(if demo.is_some() {
        Duration::from_millis(5)
    } else {
        Duration::from_secs(1)
    });
    let mut allow = a.allow_private.clone();
    if demo.is_some() {
        // The demo's farm is ours, on loopback.
        allow.push(loopback());
    }
    let mut hub = a.plan.hub_config(clock.scale(), host_gap)?;
    // Its in-process workers fetch what `allow` permits; its registry accepts the same.
    hub.private_allowed = allow.clone();
    if demo.is_some() {
        // The demo's summary measures every posting published since the start from the
        // store, so the demo keeps them all, however long it runs.
        hub.retention.postings = None;
        hub.retention.markers = None;
    }
    let running = serve::start(
        store,
        ServerOptions {
            listen: a.listen,
            admin_listen: None,
            public_listen: None,
            // In-process workers and an operator on the same machine: open, on loopback only
            // (checked above).
            guard: kairos_coordinator::auth::Guard::default(),
            max_worker_capacity: f64::MAX,
            tls: None,
            metrics_addr: Some(a.metrics_addr),
            extra_buckets: kairos_worker::telemetry::buckets(),
            // The demo's hub calls back on loopback.
            push: demo
                .as_ref()
                .and_then(|d| d.hub.as_ref())
                .map(|_| serve::PushOptions {
                    listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                    public_url: None,
                    listener: Default::default(),
                    policy: Default::default(),
                }),
            hub,
            clock,
        },
    )
    .await?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let stats: Vec<Arc<AgentStats>> = (0..a.workers).map(|_| Arc::default()).collect();
    let mut agents = Vec::new();
    for (i, s) in stats.iter().enumerate() {
        let cfg = AgentConfig {
            coordinator: format!("http://{}", running.addr),
            name: format!("standalone-{i}"),
            capacity: 1000.0,
            max_in_flight: a.max_in_flight.max(1),
            host_gap,
            fetch: FetchConfig {
                policy: TargetPolicy::allowing(allow.clone()),
                ..FetchConfig::default()
            },
            report_buffer: 10_000,
            // The in-process workers stop before the server: their last reports land.
            drain_timeout: std::time::Duration::from_secs(5),
            clock,
            ingest_address: String::new(),
            credentials: Default::default(),
            parse_threads: kairos_worker::document::Reader::default_threads(),
            parse_budget: kairos_worker::document::DEFAULT_BUDGET,
        };
        agents.push(tokio::spawn(agent::run(
            cfg,
            s.clone(),
            None,
            stop_rx.clone(),
        )));
    }
    let readers = demo.as_ref().map(|d| {
        tokio::spawn(simulate_readers(
            running.hub.clone(),
            a.demo_users,
            a.demo_seed,
            d.start_ms,
            stop_rx.clone(),
        ))
    });
    let start_ms = clock.now_ms();
    let wall_hour = Duration::from_secs_f64((3600.0 / clock.scale()).max(1.0));
    let mut history = DelayHistory::new();
    let mut hourly = tokio::time::interval_at(tokio::time::Instant::now() + wall_hour, wall_hour);
    let deadline = async {
        match a.run_for {
            Some(d) => tokio::time::sleep(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            _ = hourly.tick() => print_line(&running.hub, demo.as_ref(), start_ms, a.workers, &mut history).await,
            _ = &mut deadline => break,
            _ = kairos_runtime::process::shutdown_signal() => break,
        }
    }
    let _ = stop.send(true);
    for t in agents {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "worker failed"),
            Err(e) => tracing::error!(error = %e, "worker task panicked"),
        }
    }
    if let Some(r) = readers {
        let _ = r.await;
    }
    let summary = summarize(&running, demo.as_ref(), start_ms, a.workers).await?;
    println!("final: {}", summary);
    if let Some(path) = &a.summary_json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    running.shutdown().await?;
    Ok(())
}

/// Feeds readers' accesses to the hub as the simulated clock passes them.
async fn simulate_readers<B: KvBackend>(
    hub: Arc<Hub<B>>,
    users: usize,
    seed: u64,
    from_ms: i64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xacce55);
    let clock = hub.clock();
    let mut last = from_ms;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let now = clock.now_ms();
        let events: Vec<_> = demo::reader_accesses(&mut rng, users, READS_PER_DAY, last, now)
            .into_iter()
            .map(|(u, t)| kairos_coordinator::access::AccessEvent {
                user_id: format!("reader-{u}"),
                feed_id: String::new(),
                unix_ms: t,
            })
            .collect();
        last = now;
        if !events.is_empty() {
            hub.record_access(events).await;
        }
    }
}

/// Delay sums at past hourly lines, for the trailing-day figure.
type DelayHistory = std::collections::VecDeque<(i64, f64, u64)>;

/// One hourly line: totals so far, and the realized delay of the last simulated day next
/// to uniform polling's on the same postings (the learning shows in the trailing figure).
async fn print_line<B: KvBackend>(
    hub: &Hub<B>,
    demo: Option<&DemoFarm>,
    start_ms: i64,
    workers: usize,
    history: &mut DelayHistory,
) {
    let t = hub.totals().await;
    let (planned, live) = (hub.feeds_planned().await, hub.workers().await.len());
    let now = hub.clock().now_ms();
    let days = (now - start_ms) as f64 / DAY_MS as f64;
    let budget_per_day = t.last_plan.as_ref().map_or(0.0, |p| p.budget_per_day);
    history.push_back((now, t.delay_sum_ms, t.delay_count));
    while history.front().is_some_and(|&(at, ..)| at < now - DAY_MS) {
        history.pop_front();
    }
    let (since, sum0, n0) = history.front().copied().unwrap_or((now, 0.0, 0));
    let minutes = |sum: f64, n: u64| {
        if n > 0 {
            format!("{:.1} min", sum / n as f64 / 60_000.0)
        } else {
            "-".into()
        }
    };
    let delay = minutes(t.delay_sum_ms, t.delay_count);
    let last_day = minutes(t.delay_sum_ms - sum0, t.delay_count - n0);
    let uniform = |from: i64| {
        demo.and_then(|d| {
            let per_day = budget_per_day / d.farm.feeds().len().max(1) as f64;
            uniform_delay(&d.farm, per_day, from.max(d.start_ms), &|_| now)
        })
        .map(|u| format!(" (uniform {:.1} min)", u / 60.0))
        .unwrap_or_default()
    };
    let when = chrono::DateTime::from_timestamp_millis(now)
        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default();
    let push = match demo.and_then(|d| d.hub.as_ref()) {
        Some(h) => {
            let (on, off) = crate::demo_push::observe(hub, h, start_ms).await;
            format!(" | planned/feed/day: hub's {on:.2}, others {off:.2}")
        }
        None => String::new(),
    };
    println!(
        "[{when} sim, day {days:.2}] feeds {} | workers {}/{workers} | fetches {} (budget {:.0}) | delay {delay}{} | last day {last_day}{} | missed/access {:.3} | postings {} new, {} dup{push}",
        planned,
        live,
        t.fetches,
        budget_per_day * days,
        uniform(start_ms),
        uniform(since),
        if t.accesses > 0 { t.missed as f64 / t.accesses as f64 } else { 0.0 },
        t.postings_new,
        t.postings_duplicate,
    );
}

/// Average delay (s) of uniform polling at `per_day` fetches per feed, over the farm's
/// postings published in `[from_ms, until(feed)]` whose uniform fetch came by then.
fn uniform_delay(
    farm: &Farm,
    per_day: f64,
    from_ms: i64,
    until: &dyn Fn(usize) -> i64,
) -> Option<f64> {
    if per_day <= 0.0 {
        return None;
    }
    let (mut sum, mut n) = (0.0, 0u64);
    for f in farm.feeds() {
        let end = until(f.index);
        let phase = demo::phase_of(f.index);
        for &p in f.postings.iter().filter(|&&p| p >= from_ms && p <= end) {
            let fetch = demo::uniform_next_fetch(p, per_day, phase);
            if fetch <= end {
                sum += (fetch - p) as f64;
                n += 1;
            }
        }
    }
    (n > 0).then(|| sum / n as f64 / 1000.0)
}

/// The final summary. Farm-only fields are absent without `--demo`; per-feed fetch counts
/// are present without it.
async fn summarize<B: KvBackend>(
    running: &Running<B>,
    demo: Option<&DemoFarm>,
    start_ms: i64,
    workers: usize,
) -> Result<serde_json::Value> {
    let hub = &running.hub;
    let t = hub.totals().await;
    let now = hub.clock().now_ms();
    let days = (now - start_ms) as f64 / DAY_MS as f64;
    let budget_per_day = t
        .last_plan
        .as_ref()
        .map(|p| p.budget_per_day)
        .unwrap_or(0.0);
    let mut s = serde_json::json!({
        "feeds": hub.feeds_planned().await,
        "workers": workers,
        "fetches": t.fetches,
        "budget_fetches": (budget_per_day * days).round(),
        "budget_per_day": budget_per_day,
        // Fetches started per UTC day: each at most the day's budget (the workers'
        // allowances hold it).
        "fetches_by_day": t
            .fetches_by_day
            .iter()
            .map(|(day, n)| serde_json::json!({ "day": day, "fetches": n }))
            .collect::<Vec<_>>(),
        "fetch_outcomes": t.outcomes,
        "duplicates_ingested": t.postings_duplicate,
        "reports_rejected": t.reports_rejected,
        "accesses": t.accesses,
        "missed_per_access": if t.accesses > 0 { t.missed as f64 / t.accesses as f64 } else { 0.0 },
        "simulated_days": days,
        "plan": t.last_plan,
    });
    let obj = s.as_object_mut().expect("object");
    match demo {
        Some(d) => {
            // Per feed: postings published after the run started and up to the start of
            // the feed's last answered fetch, which every one of them should have reached.
            let (mut published, mut ingested, mut delay_sum, mut delayed) = (0u64, 0u64, 0.0, 0u64);
            let mut last_start = BTreeMap::new();
            // Feed → (postings never ingested, postings published, fetches).
            let mut missing: BTreeMap<String, (usize, usize, u64)> = BTreeMap::new();
            // (excess delay-seconds over the model, feed, postings, realized, expected, fetches/day)
            let mut gaps: Vec<(f64, String, u64, f64, f64, f64)> = Vec::new();
            for f in d.farm.feeds() {
                let id = format!("farm-{}", f.index);
                let until = t.last_fetch_started.get(&id).copied().unwrap_or(i64::MIN);
                last_start.insert(f.index, until);
                let window: Vec<i64> = f
                    .postings
                    .iter()
                    .copied()
                    .filter(|&p| p >= d.start_ms && p <= until)
                    .collect();
                published += window.len() as u64;
                let stored = all_postings(hub, &id).await?;
                let mut seen: Vec<i64> =
                    stored.iter().filter_map(|p| p.published_unix_ms).collect();
                seen.sort_unstable();
                let lost = window
                    .iter()
                    .filter(|p| seen.binary_search(p).is_err())
                    .count();
                if lost > 0 {
                    missing.insert(
                        id.clone(),
                        (
                            lost,
                            window.len(),
                            t.fetches_per_feed.get(&id).copied().unwrap_or(0),
                        ),
                    );
                }
                // The same postings as `published`: after the start, up to the last fetch.
                let (mut feed_sum, mut feed_n) = (0.0, 0u64);
                for p in &stored {
                    if let Some(pub_ms) = p
                        .published_unix_ms
                        .filter(|&x| x >= d.start_ms && x <= until)
                    {
                        ingested += 1;
                        delay_sum += (p.discovered_unix_ms - pub_ms) as f64;
                        delayed += 1;
                        feed_sum += (p.discovered_unix_ms - pub_ms) as f64 / 1000.0;
                        feed_n += 1;
                    }
                }
                if let Some(v) = hub.inspect(&id).await {
                    gaps.push((
                        feed_sum - feed_n as f64 * v.expected_delay_seconds,
                        id.clone(),
                        feed_n,
                        if feed_n > 0 {
                            feed_sum / feed_n as f64
                        } else {
                            0.0
                        },
                        v.expected_delay_seconds,
                        v.fetches_per_day,
                    ));
                }
            }
            let feeds = d.farm.feeds().len().max(1);
            let uniform = uniform_delay(&d.farm, budget_per_day / feeds as f64, d.start_ms, &|i| {
                last_start[&i]
            });
            obj.insert("postings_published".into(), published.into());
            // Published postings no fetch saw: they scrolled off a feed's document (more new
            // items between two fetches than the document holds).
            obj.insert(
                "postings_missing".into(),
                missing.values().map(|m| m.0).sum::<usize>().into(),
            );
            obj.insert(
                "feeds_missing_postings".into(),
                serde_json::to_value(&missing)?,
            );
            // Where realized delay exceeds the model's expectation most (postings x excess):
            // feed, postings, realized and expected delay (s), planned fetches per day.
            gaps.sort_by(|a, b| b.0.total_cmp(&a.0));
            obj.insert(
                "largest_delay_excess".into(),
                serde_json::to_value(
                    gaps.iter()
                        .take(10)
                        .map(|g| {
                            (
                                &g.1,
                                g.2,
                                g.3.round(),
                                g.4.round(),
                                (g.5 * 100.0).round() / 100.0,
                            )
                        })
                        .collect::<Vec<_>>(),
                )?,
            );
            obj.insert("postings_ingested".into(), ingested.into());
            obj.insert(
                "avg_delay_seconds".into(),
                (if delayed > 0 {
                    delay_sum / delayed as f64 / 1000.0
                } else {
                    0.0
                })
                .into(),
            );
            obj.insert(
                "uniform_avg_delay_seconds".into(),
                uniform.unwrap_or(0.0).into(),
            );
            // Per feed, so runs with and without push compare the same feeds.
            obj.insert(
                "fetches_per_feed".into(),
                serde_json::to_value(&t.fetches_per_feed)?,
            );
            if let Some(h) = &d.hub {
                obj.insert(
                    "push".into(),
                    crate::demo_push::summary(hub, &d.farm, h, d.start_ms, now).await?,
                );
            }
        }
        None => {
            obj.insert("postings_ingested".into(), t.postings_new.into());
            obj.insert(
                "avg_delay_seconds".into(),
                (if t.delay_count > 0 {
                    t.delay_sum_ms / t.delay_count as f64 / 1000.0
                } else {
                    0.0
                })
                .into(),
            );
            obj.insert(
                "fetches_per_feed".into(),
                serde_json::to_value(&t.fetches_per_feed)?,
            );
        }
    }
    Ok(s)
}

async fn all_postings<B: KvBackend>(
    hub: &Hub<B>,
    feed: &str,
) -> Result<Vec<kairos_coordinator::ingest::PostingRecord>> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = hub.ingestor().list(feed, &cursor, 1000).await?;
        if page.postings.is_empty() {
            return Ok(out);
        }
        out.extend(page.postings);
        cursor = page.next_cursor;
    }
}
