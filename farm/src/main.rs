//! `kairos-farm`: a synthetic feed farm on loopback (plus misbehaving endpoints and a folder
//! of fixed documents under `/s/NAME`), for demos and end-to-end tests against real processes.
//! It prints "kairos-farm ready: …" once every host listens, and stops on SIGINT/SIGTERM.

use anyhow::{Context, Result};
use clap::Parser;
use kairos_farm::farm::{Farm, FarmConfig, Faults};
use kairos_farm::fixtures::Fixtures;
use kairos_runtime::clock::ClockArgs;
use kairos_runtime::process::shutdown_signal;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Serve a synthetic feed farm on loopback (for demos and tests).
#[derive(Parser)]
#[command(name = "kairos-farm", version, about = "Kairos loopback feed farm")]
struct FarmArgs {
    /// Feeds.
    #[arg(long, default_value_t = 100)]
    feeds: usize,
    /// Loopback hosts the feeds are spread over (127.0.0.1, 127.0.0.2, ...).
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Mean postings per feed per day.
    #[arg(long, default_value_t = 4.0)]
    posts_per_day: f64,
    /// Days of postings after the start (the farm goes quiet after that).
    #[arg(long, default_value_t = 30.0)]
    days: f64,
    /// Days of postings already published at the start.
    #[arg(long, default_value_t = 0.0)]
    history_days: f64,
    /// Items per served document.
    #[arg(long, default_value_t = 50)]
    items_per_doc: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the feed URLs here, one per line, in feed order.
    #[arg(long)]
    urls_out: Option<PathBuf>,
    /// Write every posting here as `feed_index,unix_ms` lines.
    #[arg(long)]
    postings_out: Option<PathBuf>,
    /// Fault bursts per host per simulated day (503s or held requests; 0 = none).
    #[arg(long, default_value_t = 0.0)]
    fault_bursts_per_host_per_day: f64,
    /// Length of a fault burst, simulated minutes.
    #[arg(long, default_value_t = 30.0)]
    fault_burst_minutes: f64,
    /// Share of fault bursts that hold requests instead of answering 503.
    #[arg(long, default_value_t = 0.0)]
    fault_hang_share: f64,
    /// How long a held request is held (wall time) before a 503.
    #[arg(long, default_value = "60s")]
    fault_hang: humantime::Duration,
    /// Share of feeds whose documents name a WebSub hub the farm serves (0: no hub).
    #[arg(long, default_value_t = 0.0)]
    hub_share: f64,
    /// The hub falls silent this many simulated days after the start (never by default).
    #[arg(long)]
    hub_silent_after_days: Option<f64>,
    /// The hub delivers each posting this many simulated minutes after its publication.
    #[arg(long, default_value_t = 0.0)]
    hub_lag_minutes: f64,
    /// The hub grants this lease (seconds) whatever is asked.
    #[arg(long)]
    hub_lease_seconds: Option<u64>,
    /// The hub denies every subscription.
    #[arg(long)]
    hub_deny: bool,
    /// Share of subscription requests the hub answers 503.
    #[arg(long, default_value_t = 0.0)]
    hub_unavailable_share: f64,
    /// The hub signs deliveries with a wrong key.
    #[arg(long)]
    hub_bad_signature: bool,
    /// The hub names another topic in its deliveries.
    #[arg(long)]
    hub_wrong_topic: bool,
    /// The hub pushes only the new items, not the whole document.
    #[arg(long)]
    hub_partial: bool,
    /// The documents name a hub that is down (503 to every request) before the farm's hub.
    #[arg(long)]
    hub_down_first: bool,
    /// Also serve misbehaving endpoints and this folder's files under `/s/NAME`.
    #[arg(long)]
    fixtures_dir: Option<PathBuf>,
    #[command(flatten)]
    clock: ClockArgs,
}

fn main() -> ExitCode {
    kairos_runtime::process::init_tracing();
    let args = FarmArgs::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(farm(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn farm(a: FarmArgs) -> Result<()> {
    let clock = a.clock.clock()?;
    let farm = Arc::new(Farm::generate(
        FarmConfig {
            feeds: a.feeds.max(1),
            hosts: a.hosts.clamp(1, 250 * 256),
            mean_posts_per_day: a.posts_per_day,
            days: a.days,
            history_days: a.history_days,
            items_per_doc: a.items_per_doc.max(1),
            pad_bytes: 0,
            seed: a.seed,
            faults: Faults {
                bursts_per_host_per_day: a.fault_bursts_per_host_per_day.max(0.0),
                burst_minutes: a.fault_burst_minutes.max(0.0),
                hang_share: a.fault_hang_share.clamp(0.0, 1.0),
                hang: a.fault_hang.into(),
            },
        },
        clock,
    ));
    let serving = farm
        .clone()
        .serve()
        .await
        .context("binding the farm's hosts")?;
    let fixtures = match &a.fixtures_dir {
        Some(dir) => {
            let f = Fixtures::start(Some(dir.clone()))
                .await
                .context("binding the fixtures server")?;
            println!("kairos-farm fixtures on 127.0.0.1:{}", f.port);
            Some(f)
        }
        None => None,
    };
    let hub = if a.hub_share > 0.0 {
        let on = kairos_farm::hub::pick(farm.feeds().len(), a.hub_share.min(1.0), a.seed);
        let faults = kairos_farm::hub::HubFaults {
            silent_from_ms: a
                .hub_silent_after_days
                // Any number given: NaN reads as now, a huge one as never.
                .map(|d| {
                    clock
                        .now_ms()
                        .saturating_add((d.max(0.0) * 86_400_000.0) as i64)
                }),
            lag_ms: (a.hub_lag_minutes.max(0.0) * 60_000.0) as i64,
            lease_seconds: a.hub_lease_seconds,
            deny: a.hub_deny,
            unavailable_share: a.hub_unavailable_share.clamp(0.0, 1.0),
            bad_signature: a.hub_bad_signature,
            wrong_topic: a.hub_wrong_topic,
            partial: a.hub_partial,
            down_first: a.hub_down_first,
        };
        let h = kairos_farm::hub::TestHub::start(farm.clone(), &serving.urls, on, faults)
            .await
            .context("binding the hub")?;
        println!("kairos-farm hub on {}", h.url);
        Some(h)
    } else {
        None
    };
    if let Some(p) = &a.urls_out {
        std::fs::write(p, serving.urls.join("\n") + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.postings_out {
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        );
        for f in farm.feeds() {
            for t in &f.postings {
                writeln!(out, "{},{t}", f.index)?;
            }
        }
        out.flush()?;
    }
    let (burst_minutes, bursts) = farm.burst_totals();
    println!(
        "kairos-farm ready: {} feeds on {} hosts ({bursts} fault bursts, {burst_minutes:.0} simulated host-minutes)",
        serving.urls.len(),
        serving.hosts.len()
    );
    shutdown_signal().await;
    drop(hub);
    drop(fixtures);
    drop(serving);
    Ok(())
}
