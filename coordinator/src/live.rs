//! Command-line options of the live commands (`serve`, `standalone`) and their translation
//! into hub settings.

use anyhow::{bail, Result};
use clap::Args;
use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::health::HealthPolicy;
use kairos_coordinator::control::relearn::{
    parse_lost_posting_hours, Budget, LostPostingArg, PlannerSettings, DEFAULT_LOST_POSTING_HOURS,
};
use kairos_coordinator::hub::HubConfig;
use kairos_coordinator::plan::cost::Metric;
use kairos_coordinator::plan::planner::Policy;
use kairos_coordinator::server::ServerOptions;
use kairos_runtime::clock::SimClock;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Planner and loop settings of a live coordinator.
#[derive(Args, Clone, Debug)]
pub struct LivePlanArgs {
    /// Objective: delay, miss or access-delay.
    #[arg(long, default_value = "delay")]
    pub metric: Metric,
    /// Policy.
    #[arg(long, default_value = "optimal")]
    pub policy: Policy,
    /// Budget as average fetches per feed per day (default 4 when no budget is given).
    #[arg(long, conflicts_with = "budget")]
    pub fetches_per_feed_per_day: Option<f64>,
    /// Budget as total fetches per day.
    #[arg(long)]
    pub budget: Option<f64>,
    /// Minimum fetches per day per feed; a fraction such as 0.142857 means once a week.
    #[arg(long, default_value_t = 1.0 / 7.0)]
    pub min_fetches_per_day: f64,
    /// Maximum fetches per day per feed.
    #[arg(long)]
    pub max_fetches_per_day: Option<f64>,
    /// Slots per day.
    #[arg(long, default_value_t = 1440)]
    pub slots: usize,
    /// Days of observations a model learns from.
    #[arg(long, default_value_t = PlannerSettings::default().window_days)]
    pub window_days: f64,
    /// Half-life of an observation's weight in the models, days (0: none).
    #[arg(long, default_value_t = PlannerSettings::default().half_life_days)]
    pub half_life_days: f64,
    /// Pseudo-days of the pooled hourly pattern added to each feed's observations (higher:
    /// steadier, slower to specialise).
    #[arg(long, default_value_t = PlannerSettings::default().shrinkage)]
    pub shrinkage_days: f64,
    /// Pseudo-postings of the pooled hourly shape each feed's hours take at least, so a
    /// quiet feed's few postings do not decide its fetch times alone (0: pseudo-days only).
    #[arg(long, default_value_t = PlannerSettings::default().shape_pseudo_postings)]
    pub shape_pseudo_postings: f64,
    /// Base shapes of the mixture feeds' daily shapes are pooled in (each at any hourly
    /// shift; similar feeds share strength). 0: one pooled shape for every feed.
    #[arg(long, default_value_t = PlannerSettings::default().shape_mixture)]
    pub shape_mixture: usize,
    /// Budget, fetches per feed per day, below which the one pooled shape is used in place
    /// of the mixture (0: the mixture at any budget).
    #[arg(long, default_value_t = PlannerSettings::default().mixture_min_per_day)]
    pub mixture_min_per_day: f64,
    /// Pool each feed's rate and hours with its host's other feeds' as a level between the
    /// feed and everyone (strength chosen on held-out days; off by default, docs/PLANNER.md).
    #[arg(long)]
    pub host_level: bool,
    /// Re-solve a feed between rounds when a fetch finds postings its model did not expect
    /// (the default; docs/PLANNER.md). Kept so scripts that asked for it still run.
    #[arg(long, overrides_with = "no_quick_updates")]
    pub quick_updates: bool,
    /// Leave every feed to the next round, however much a fetch surprised its model.
    #[arg(long, overrides_with = "quick_updates")]
    pub no_quick_updates: bool,
    /// Leave each feed's rate as its window says, without the forward calibration (by what
    /// feeds forecast alike a week before went on to post; docs/PLANNER.md).
    #[arg(long)]
    pub no_rate_calibration: bool,
    /// Shrink each feed's rate by pseudo-days toward the typical feed's, as before the
    /// population's distribution of rates was fitted (docs/PLANNER.md, "Rates under the
    /// population's distribution").
    #[arg(long)]
    pub no_rate_prior: bool,
    /// Leave feeds whose postings land at one time of day (a feed on a timer) to their
    /// hourly bins, which spread that time over an hour or two, instead of giving them a
    /// peak there (docs/PLANNER.md, "Feeds on a timer").
    #[arg(long)]
    pub no_timer_peaks: bool,
    /// Hours of delay one posting lost to a document overflowing between fetches costs the
    /// plan, or `floors`: fetch often enough that no document is expected to overflow,
    /// where the budget allows (docs/PLANNER.md).
    #[arg(long, default_value_t = LostPostingArg(Some(DEFAULT_LOST_POSTING_HOURS)), value_parser = parse_lost_posting_hours)]
    pub lost_posting_hours: LostPostingArg,
    /// How long postings are kept after their discovery (on the run's clock), or `forever`:
    /// how far back the Postings API pages. Older ones are removed in bounded batches once
    /// a minute. Three days keep a million feeds posting once a day within half of an
    /// 8 GiB etcd quota (docs/STATE.md).
    #[arg(long, default_value = "3d", value_parser = parse_retention)]
    pub postings_retention: RetentionArg,
    /// How long an item's idempotency marker is kept (at least `--postings-retention`): an
    /// item still in a feed's document after its marker went would be stored again.
    #[arg(long, default_value = "30d", value_parser = parse_retention)]
    pub item_marker_retention: RetentionArg,
    /// Wall time between two retention passes.
    #[arg(long, default_value = "1m")]
    pub retention_interval: humantime::Duration,
    /// Wall time between two compactions of etcd's history (`--store etcd`): each compacts
    /// up to the revision seen at the previous one, so one interval of history stays.
    #[arg(long, default_value = "1h")]
    pub store_compaction_interval: humantime::Duration,
    /// Wall time between two writes of the plan to the store, which a new leader (a
    /// failover, a restart) serves while its first round solves (`0s`: never written; a
    /// new leader then plans before it serves). Each write is about 80 bytes per feed,
    /// kept by etcd until its next compaction.
    #[arg(long, default_value = "5m")]
    pub plan_snapshot_interval: humantime::Duration,
    /// Wall-clock time between relearn + replan rounds (e.g. 5s, 1m).
    #[arg(long, default_value = "5s")]
    pub replan_interval: humantime::Duration,
    /// Lease of a worker session: missing heartbeats this long moves its hosts.
    #[arg(long, default_value = "6s")]
    pub worker_lease: humantime::Duration,
    /// Wall-clock time workers keep between two fetches of one host (their `--host-gap`;
    /// `standalone` gives it to its workers). The plan gives no host more than 90% of the
    /// fetches that allows, on the run's clock, and reports the budget it could not place.
    /// `0s` leaves hosts uncapped. Default: 1s (the demo farm's loopback hosts: 5ms).
    #[arg(long)]
    pub host_gap: Option<humantime::Duration>,
    /// Most planned fetches the cluster starts in any one minute of the plan's clock: a
    /// minute above it gives up the fetches that cost their feeds least to move, to nearby
    /// minutes with room (counted day by day: a feed fetched every k days where it is
    /// fetched). Planned fetches only: catch-ups and other fetches the workers add are not
    /// held. Default: uncapped.
    #[arg(long)]
    pub max_fetches_per_minute: Option<f64>,
    /// Plan over a week: feeds with two or more weeks of history learn day-of-week factors
    /// (shrunk toward everyone's, chosen per feed on held-out weeks) and schedules repeat
    /// weekly. Costs about seven times the solve time of a daily plan, and up to three more
    /// solves a round while its prices per day of the week step toward even days: the
    /// workers hold every day to the day's budget (docs/OPERATIONS.md, "Weekly plans and the
    /// day's budget"). On `real-commits` at a fetch a day it realized 1.023 times the daily
    /// plan's delay before those prices (docs/EXPERIMENTS.md).
    #[arg(long)]
    pub weekly: bool,
    /// Ignore publisher hints (Cache-Control max-age, <ttl>, sy:updatePeriod, skipHours,
    /// skipDays) instead of letting them bound each feed's plan.
    #[arg(long)]
    pub ignore_hints: bool,
    /// Longest interval between fetches a publisher hint may impose (simulated time); a
    /// longer hint (a <ttl> of years) is read as this.
    #[arg(long, default_value = "1d")]
    pub max_hint_interval: humantime::Duration,
    /// Back-off after a feed's first failed fetch; it doubles with each further failure
    /// (simulated time).
    #[arg(long, default_value = "1h")]
    pub backoff_base: humantime::Duration,
    /// Longest back-off: a broken feed is still probed this often, and recovers on its
    /// first answer (simulated time).
    #[arg(long, default_value = "1d")]
    pub backoff_max: humantime::Duration,
}

/// Share of a host's politeness capacity the plan may use: the rest absorbs lateness and
/// fetches of one host planned close together.
pub const HOST_CAPACITY_SHARE: f64 = 0.9;

/// Fetches per simulated day one host allows with a wall-clock `gap` on a clock running
/// `time_scale` times faster than the wall clock, after [`HOST_CAPACITY_SHARE`]; `None` for
/// a zero gap.
pub fn host_fetches_per_day(gap: Duration, time_scale: f64) -> Option<f64> {
    let simulated_gap = gap.as_secs_f64() * time_scale;
    (simulated_gap > 0.0).then(|| HOST_CAPACITY_SHARE * 86_400.0 / simulated_gap)
}

impl LivePlanArgs {
    /// The politeness gap these options give, or `default`.
    pub fn host_gap_or(&self, default: Duration) -> Duration {
        self.host_gap.map(Into::into).unwrap_or(default)
    }

    /// The hub settings these options describe, for a clock at `time_scale` and workers
    /// keeping `host_gap` between fetches of one host.
    pub fn hub_config(&self, time_scale: f64, host_gap: Duration) -> Result<HubConfig> {
        let budget = match (self.fetches_per_feed_per_day, self.budget) {
            (_, Some(m)) => Budget::PerDay(m),
            (Some(x), None) => Budget::PerFeedPerDay(x),
            (None, None) => Budget::PerFeedPerDay(4.0),
        };
        let planner = PlannerSettings {
            metric: self.metric,
            policy: self.policy,
            budget,
            min_fetches_per_day: self.min_fetches_per_day,
            max_fetches_per_day: self.max_fetches_per_day,
            slots: self.slots,
            window_days: self.window_days,
            half_life_days: self.half_life_days,
            shrinkage: self.shrinkage_days,
            shape_pseudo_postings: self.shape_pseudo_postings,
            shape_mixture: self.shape_mixture,
            mixture_min_per_day: self.mixture_min_per_day,
            host_level: self.host_level,
            // The pair overrides each other: at most one is set, the last given.
            quick_updates: self.quick_updates || !self.no_quick_updates,
            calibrate_rates: !self.no_rate_calibration,
            rate_prior: !self.no_rate_prior,
            timer_peaks: !self.no_timer_peaks,
            lost_posting_hours: self.lost_posting_hours.0,
            host_fetches_per_day: host_fetches_per_day(host_gap, time_scale),
            max_fetches_per_minute: self.max_fetches_per_minute,
            weekly: self.weekly,
            ..PlannerSettings::default()
        };
        if let Err(e) = planner.validate() {
            bail!("{e}");
        }
        let lease: Duration = self.worker_lease.into();
        if lease < Duration::from_millis(500) {
            bail!("--worker-lease must be at least 500ms");
        }
        let replan: Duration = self.replan_interval.into();
        if replan < Duration::from_millis(100) {
            bail!("--replan-interval must be at least 100ms");
        }
        let ms =
            |d: humantime::Duration| Duration::from(d).as_millis().min(i64::MAX as u128) as i64;
        let health = HealthPolicy {
            respect_hints: !self.ignore_hints,
            max_hint_ms: ms(self.max_hint_interval),
            backoff_base_ms: ms(self.backoff_base),
            backoff_max_ms: ms(self.backoff_max),
            ..HealthPolicy::default()
        };
        if health.max_hint_ms < 1000 || health.backoff_base_ms < 1000 {
            bail!("--max-hint-interval and --backoff-base must be at least 1s");
        }
        if health.backoff_max_ms < health.backoff_base_ms {
            bail!("--backoff-max must be at least --backoff-base");
        }
        let retention = kairos_coordinator::retention::Retention {
            postings: self.postings_retention.0,
            markers: self.item_marker_retention.0,
            every: self.retention_interval.into(),
            compact_every: self.store_compaction_interval.into(),
        };
        if retention.every < Duration::from_millis(100)
            || retention.compact_every < Duration::from_millis(100)
        {
            bail!("--retention-interval and --store-compaction-interval must be at least 100ms");
        }
        if let Err(e) = retention.validate() {
            bail!("--item-marker-retention: {e}");
        }
        Ok(HubConfig {
            retention,
            health,
            cluster: ClusterConfig {
                lease,
                heartbeat: lease / 3,
                ..ClusterConfig::default()
            },
            planner,
            replan_interval: replan,
            plan_snapshot_every: Some(Duration::from(self.plan_snapshot_interval))
                .filter(|d| !d.is_zero()),
            private_allowed: Vec::new(),
        })
    }
}

/// A retention given on the command line (`None`: for ever).
#[derive(Clone, Copy, Debug)]
pub struct RetentionArg(pub Option<Duration>);

/// A retention: a duration (`7d`, `12h`) or `forever`.
fn parse_retention(s: &str) -> Result<RetentionArg, String> {
    if s == "forever" {
        return Ok(RetentionArg(None));
    }
    let d: Duration = s
        .parse::<humantime::Duration>()
        .map_err(|e| format!("`{s}`: {e} (a duration such as 7d, or `forever`)"))?
        .into();
    if d < Duration::from_secs(60) {
        return Err(format!("`{s}` is shorter than a minute"));
    }
    Ok(RetentionArg(Some(d)))
}

/// The clock options shared by the live commands.
#[derive(Args, Clone, Debug)]
pub struct ClockArgs {
    /// Run the system's clock this many times faster than the wall clock (1 = real time).
    #[arg(long)]
    pub time_scale: Option<f64>,
    /// Simulated instant the clock starts at (RFC 3339); default: now.
    #[arg(long)]
    pub clock_start: Option<String>,
    /// Wall-clock instant (Unix ms) at which the clock reads `--clock-start`; processes
    /// given the same pair share one simulated time. Default: this process's start.
    #[arg(long, requires = "clock_start")]
    pub clock_anchor_unix_ms: Option<i64>,
}

impl ClockArgs {
    /// The clock, with `default_scale` when no scale is given.
    pub fn clock(&self, default_scale: f64) -> Result<SimClock> {
        SimClock::from_options(
            self.time_scale.unwrap_or(default_scale),
            self.clock_start.as_deref(),
            self.clock_anchor_unix_ms,
        )
        .map_err(anyhow::Error::msg)
    }
}

/// `serve` options.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one; the bound address is printed): worker
    /// control, and the roles not given their own address.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,
    /// Admin and server reflection on their own address.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// Ingest (reader access events) and Postings on their own address.
    #[arg(long)]
    pub public_listen: Option<SocketAddr>,
    /// WebSub push: the callback listener hubs call, on its own address (plain HTTP; put
    /// TLS in front of it). Without it, no feed is subscribed at a hub.
    #[arg(long)]
    pub push_listen: Option<SocketAddr>,
    /// The URL hubs reach the callback listener's `/websub` path at (e.g.
    /// https://push.example.org/websub); required unless --push-listen is a loopback address.
    #[arg(long, requires = "push_listen")]
    pub push_url: Option<String>,
    /// Bearer tokens with scopes, one `name scopes token` per line (see docs/SECURITY.md);
    /// re-read when the file changes.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Serve without credentials. Allowed only when every listen address is loopback.
    #[arg(long)]
    pub insecure_loopback: bool,
    /// Accept feed URLs whose host is an IP literal in this private/loopback network
    /// (repeatable), e.g. 127.0.0.0/8; others outside the public address space are refused
    /// at AddFeed and ImportOpml. Workers need their own `--allow-private` to fetch them.
    #[arg(long)]
    pub allow_private: Vec<ipnet::IpNet>,
    /// Capacity a worker may claim at most, fetches per second.
    #[arg(long, default_value_t = 200.0)]
    pub max_worker_capacity: f64,
    /// Serve TLS with this certificate chain (PEM) on every listener; re-read on change.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Key (PEM) of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require worker client certificates chaining to this CA (PEM) on the worker-control
    /// listener; a worker registers only under a name its certificate carries.
    #[arg(long, requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Directory of the embedded store (created if missing). Without it (and without
    /// `--store etcd`), state is kept in memory and lost on exit.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Where state lives: `embedded` (one file under --data-dir), `memory`, or `etcd`
    /// (--etcd-endpoints). Default: embedded with --data-dir, memory without.
    #[arg(long)]
    pub store: Option<StoreKind>,
    /// Page cache of the embedded store, in MiB (default 128). Memory the coordinator holds
    /// on top of its live state; more keeps more of a large store's reads off the disk.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub store_cache_mib: Option<u64>,
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// Where Prometheus scrapes `/metrics` (port 0 picks a free one; printed).
    #[arg(long, default_value = "127.0.0.1:9700")]
    pub metrics_addr: SocketAddr,
    #[command(flatten)]
    pub plan: LivePlanArgs,
    #[command(flatten)]
    pub clock: ClockArgs,
}

/// The store backends `serve` can run on.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// One redb file under --data-dir.
    Embedded,
    /// In memory; lost on exit.
    Memory,
    /// An etcd cluster (--etcd-endpoints).
    Etcd,
}

/// How `serve --store etcd` reaches etcd.
#[derive(Args, Clone, Debug)]
pub struct EtcdArgs {
    /// etcd members, comma-separated `host:port` (or `https://host:port`).
    #[arg(long, value_delimiter = ',')]
    pub etcd_endpoints: Vec<String>,
    /// Prefix of every key Kairos writes in etcd (clusters sharing an etcd differ here).
    #[arg(long, default_value = "/kairos/")]
    pub etcd_prefix: String,
    /// How long to keep retrying etcd at start before exiting with an error.
    #[arg(long, default_value = "30s")]
    pub etcd_connect_timeout: humantime::Duration,
    /// CA (PEM) etcd's server certificate chains to; turns on TLS to etcd.
    #[arg(long)]
    pub etcd_ca: Option<PathBuf>,
    /// Client certificate (PEM) to present to etcd.
    #[arg(long, requires_all = ["etcd_key", "etcd_ca"])]
    pub etcd_cert: Option<PathBuf>,
    /// Key (PEM) of --etcd-cert.
    #[arg(long, requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// Operations per transaction the etcd cluster accepts (its --max-txn-ops); larger
    /// batches are journaled.
    #[arg(long, default_value_t = 128)]
    pub etcd_max_txn_ops: usize,
    /// Cluster mode: TTL of the leader's lease. A leader whose renewals go unanswered for
    /// two thirds of it stops acting; a standby takes over once it expires (at once when
    /// the leader shuts down cleanly). At least 2 s.
    #[arg(long, default_value = "10s")]
    pub leader_lease_ttl: humantime::Duration,
    /// Cluster mode: the address clients and workers should use to reach this replica,
    /// shown by standbys while it leads (default: the --listen address; in Kubernetes, the
    /// pod's address and port).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Cluster mode: etcd's space quota (its --quota-backend-bytes; etcd's default is 2 GiB).
    /// A leader refuses to run when its retention window (feeds, observed postings a day,
    /// --postings-retention and --item-marker-retention) needs more than half of it; 0 skips
    /// the check.
    #[arg(long, default_value_t = 2 << 30)]
    pub etcd_quota_bytes: u64,
}

impl ServeArgs {
    /// The store these options choose, checked for contradictions.
    pub fn store_choice(&self) -> Result<kairos_coordinator::server::StoreChoice> {
        use kairos_coordinator::server::StoreChoice;
        let kind = self.store.unwrap_or(if self.data_dir.is_some() {
            StoreKind::Embedded
        } else {
            StoreKind::Memory
        });
        if kind != StoreKind::Etcd && !self.etcd.etcd_endpoints.is_empty() {
            bail!("--etcd-endpoints needs --store etcd");
        }
        if kind != StoreKind::Embedded && self.store_cache_mib.is_some() {
            bail!("--store-cache-mib sizes the embedded store's page cache; it needs --data-dir (--store embedded)");
        }
        Ok(match kind {
            StoreKind::Memory => {
                if self.data_dir.is_some() {
                    bail!("--store memory keeps nothing on disk; drop --data-dir or use --store embedded");
                }
                StoreChoice::Memory
            }
            StoreKind::Embedded => match &self.data_dir {
                Some(d) => StoreChoice::Embedded(
                    d.clone(),
                    self.store_cache_mib.map_or(
                        kairos_coordinator::store::embedded::DEFAULT_CACHE_BYTES,
                        |m| (m as usize) << 20,
                    ),
                ),
                None => bail!("--store embedded needs --data-dir"),
            },
            StoreKind::Etcd => {
                if self.data_dir.is_some() {
                    bail!("--store etcd keeps state in etcd; --data-dir is not used with it");
                }
                if self.etcd.etcd_endpoints.is_empty() {
                    bail!("--store etcd needs --etcd-endpoints host:port[,host:port...]");
                }
                use kairos_coordinator::election::ElectionConfig;
                use kairos_coordinator::store::etcd::{EtcdConfig, EtcdTls};
                StoreChoice::Etcd(
                    EtcdConfig {
                        endpoints: self.etcd.etcd_endpoints.clone(),
                        prefix: self.etcd.etcd_prefix.clone(),
                        connect_timeout: self.etcd.etcd_connect_timeout.into(),
                        tls: self.etcd.etcd_ca.as_ref().map(|ca| EtcdTls {
                            ca: ca.clone(),
                            identity: self.etcd.etcd_cert.clone().zip(self.etcd.etcd_key.clone()),
                        }),
                        max_txn_ops: self.etcd.etcd_max_txn_ops,
                        ..EtcdConfig::default()
                    },
                    ElectionConfig {
                        ttl: {
                            let ttl: std::time::Duration = self.etcd.leader_lease_ttl.into();
                            if ttl < std::time::Duration::from_secs(2) {
                                bail!("--leader-lease-ttl must be at least 2s");
                            }
                            ttl
                        },
                        advertise: self.etcd.advertise.clone(),
                        quota_bytes: self.etcd.etcd_quota_bytes,
                    },
                )
            }
        })
    }
}

/// `standalone` options.
#[cfg(feature = "standalone")]
#[derive(Args, Debug)]
pub struct StandaloneArgs {
    /// Serve a synthetic feed farm on loopback with simulated readers, and crawl it.
    #[arg(long)]
    pub demo: bool,
    /// Feeds to crawl: an OPML file, or one URL per line (`#` starts a comment).
    #[arg(long, conflicts_with = "demo", required_unless_present = "demo")]
    pub feeds: Option<PathBuf>,
    /// In-process workers.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Exit cleanly after this much wall-clock time (e.g. 90s, 5m).
    #[arg(long)]
    pub run_for: Option<humantime::Duration>,
    /// Write the final summary as JSON here.
    #[arg(long)]
    pub summary_json: Option<PathBuf>,
    /// Address of the coordinator's gRPC server (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Where Prometheus scrapes `/metrics`.
    #[arg(long, default_value = "127.0.0.1:9700")]
    pub metrics_addr: SocketAddr,
    /// Directory of the embedded store; without it, state is in memory.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Permit fetching from this private/loopback network (repeatable), e.g. 127.0.0.0/8.
    #[arg(long)]
    pub allow_private: Vec<ipnet::IpNet>,
    /// Fetches in flight at most, per in-process worker.
    #[arg(long, default_value_t = 64)]
    pub max_in_flight: usize,
    /// Demo: feeds in the farm.
    #[arg(long, default_value_t = 300)]
    pub demo_feeds: usize,
    /// Demo: hosts (loopback addresses) the farm's feeds share.
    #[arg(long, default_value_t = 12)]
    pub demo_hosts: usize,
    /// Demo: simulated readers.
    #[arg(long, default_value_t = 100)]
    pub demo_users: usize,
    /// Demo: random seed.
    #[arg(long, default_value_t = 1)]
    pub demo_seed: u64,
    /// Demo: share of the farm's feeds that name a WebSub hub the farm serves (0: none);
    /// the coordinator subscribes them and takes their pushes on loopback.
    #[arg(long, default_value_t = 0.0)]
    pub demo_hub_share: f64,
    /// Demo: the hub falls silent this many simulated days after the start.
    #[arg(long, requires = "demo_hub_share")]
    pub demo_hub_silent_after_days: Option<f64>,
    #[command(flatten)]
    pub plan: LivePlanArgs,
    #[command(flatten)]
    pub clock: ClockArgs,
}

/// The token check `serve` runs with: tokens when given; open only when told so and
/// reachable from loopback alone.
fn guard_for(a: &ServeArgs) -> Result<kairos_coordinator::auth::Guard> {
    use kairos_coordinator::auth::{Guard, TokenFile};
    match (&a.tokens, a.insecure_loopback) {
        (Some(_), true) => anyhow::bail!("--tokens and --insecure-loopback contradict each other"),
        (Some(path), false) => Ok(Guard::new(Some(TokenFile::open(path)?))),
        (None, true) => {
            let open: Vec<SocketAddr> = [Some(a.listen), a.admin_listen, a.public_listen]
                .into_iter()
                .flatten()
                .filter(|l| !l.ip().is_loopback())
                .collect();
            if let Some(l) = open.first() {
                anyhow::bail!(
                    "--insecure-loopback serves without credentials, so it listens on loopback only; {l} is not loopback"
                );
            }
            Ok(Guard::new(None))
        }
        (None, false) => anyhow::bail!(
            "no credentials configured: give --tokens FILE (see docs/SECURITY.md), or --insecure-loopback to serve without them on loopback only"
        ),
    }
}

/// The push listener's options from `--push-listen` and `--push-url`: a URL hubs can
/// reach is required unless the listener is on loopback (tests, a demo).
pub fn push_options(
    listen: Option<SocketAddr>,
    url: Option<String>,
) -> Result<Option<kairos_coordinator::server::PushOptions>> {
    let Some(listen) = listen else {
        return Ok(None);
    };
    if let Some(u) = &url {
        let parsed = url::Url::parse(u)
            .map_err(|e| anyhow::anyhow!("--push-url `{u}` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            anyhow::bail!("--push-url `{u}` must be an http(s) URL with a host");
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            anyhow::bail!("--push-url `{u}` may not have a query or fragment");
        }
    } else if !listen.ip().is_loopback() {
        anyhow::bail!(
            "--push-listen {listen} is not loopback: give --push-url, the URL hubs reach it at"
        );
    }
    Ok(Some(kairos_coordinator::server::PushOptions {
        listen,
        public_url: url,
        listener: Default::default(),
        policy: Default::default(),
    }))
}

/// Runs `serve`.
pub fn serve(a: ServeArgs) -> Result<()> {
    kairos_runtime::process::init_tracing();
    kairos_runtime::listener::raise_open_file_limit();
    let clock = a.clock.clock(1.0)?;
    let guard = guard_for(&a)?;
    let store = a.store_choice()?;
    if !(a.max_worker_capacity > 0.0 && a.max_worker_capacity.is_finite()) {
        anyhow::bail!(
            "--max-worker-capacity must be a positive number, got {}",
            a.max_worker_capacity
        );
    }
    let o = ServerOptions {
        listen: a.listen,
        admin_listen: a.admin_listen,
        public_listen: a.public_listen,
        guard,
        max_worker_capacity: a.max_worker_capacity,
        tls: match (&a.tls_cert, &a.tls_key) {
            (Some(cert), Some(key)) => Some(kairos_coordinator::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: a.client_ca.clone(),
            }),
            _ => None,
        },
        metrics_addr: Some(a.metrics_addr),
        extra_buckets: Vec::new(),
        push: push_options(a.push_listen, a.push_url.clone())?,
        hub: HubConfig {
            private_allowed: a.allow_private.clone(),
            ..a.plan
                .hub_config(clock.scale(), a.plan.host_gap_or(Duration::from_secs(1)))?
        },
        clock,
    };
    kairos_coordinator::server::serve(store, o)
}
