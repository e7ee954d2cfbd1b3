//! The hub's side of feed health: reading a report's outcome and hints into the feed's
//! [`Health`], holding throttling hosts, following permanent redirects in the registry,
//! and turning all of it into bounds on the next plan and holds in the workers' schedules.

use super::{actor::State, figures::outcome_label, Hub};
use crate::control::feedstate::FeedState;
use crate::control::health::{self, Answer, Bounds, Change, Health, HealthPolicy, Hints};
use crate::control::hosts::{Held, HostThrottles};
use crate::control::outages::Tripped;
use crate::control::relearn::PlanOutcome;
use crate::control::FeedSpec;
use crate::metrics as m;
use crate::plan::planner::FeedModel;
use crate::registry::{check_url, FeedRecord};
use crate::store::KvBackend;
use kairos_proto::v1 as pb;
use std::collections::HashMap;
use std::sync::Arc;

/// How a report's outcome counts for the feed's health.
pub(super) fn answer_of(r: &pb::FetchReport) -> Answer {
    match outcome_label(r.outcome) {
        "ok" => Answer::Answered,
        "not_modified" => Answer::Unchanged,
        // Items the parser cannot read are as lost as a document that does not parse.
        "malformed" | "empty_unrecognized" => Answer::Malformed,
        "throttled" => Answer::Throttled,
        "client_error" if r.http_status == 410 => Answer::Gone,
        _ => Answer::Failed,
    }
}

/// The publisher's hints a report carries.
pub(super) fn hints_of(r: &pb::FetchReport) -> Hints {
    Hints {
        max_age_s: r.min_interval_seconds,
        ttl_s: r.ttl_seconds,
        update_period_s: r.update_period_seconds,
        skip_hours: r.skip_hours_mask,
        skip_days: r.skip_days_mask,
    }
}

/// A short description of a failed fetch for operators.
pub(super) fn error_of(r: &pb::FetchReport) -> String {
    let label = outcome_label(r.outcome);
    match (r.http_status, r.error.is_empty()) {
        (0, true) => label.to_string(),
        (0, false) => format!("{label}: {}", r.error),
        (s, true) => format!("{label} {s}"),
        (s, false) => format!("{label} {s}: {}", r.error),
    }
}

/// What the last plan was bounded by, for inspection.
#[derive(Clone, Debug, Default)]
pub(super) struct FeedBounds {
    pub bounds: HashMap<String, Bounds>,
    /// Planned fetches per day per host.
    pub host_rates: HashMap<String, f64>,
    /// Feeds planned per host.
    pub host_feeds: HashMap<String, usize>,
}

impl State {
    /// After reports are durable: holds throttling hosts and says what changed in feeds'
    /// health (once per change, not per fetch); returns the permanent redirects to follow
    /// in the registry.
    pub(super) fn after_fetches(
        &mut self,
        done: &[(&pb::FetchReport, Change)],
    ) -> Vec<(String, String)> {
        let mut moves = Vec::new();
        for (r, change) in done {
            let feed = r.feed_id.as_str();
            let spec = self.cluster.feeds().get(feed).cloned();
            let spec = spec.as_ref();
            if answer_of(r) == Answer::Throttled {
                let host = spec.map(|s| s.host.clone()).unwrap_or_default();
                if !host.is_empty() {
                    let planned = self.bounds.host_rates.get(&host).copied().unwrap_or(1.0);
                    let feeds = self.bounds.host_feeds.get(&host).copied().unwrap_or(1);
                    let t = &mut self.throttles;
                    let was_held = t.route(&host, feed, r.finished_unix_ms).is_some();
                    let at = r.finished_unix_ms;
                    match t.throttled_route(&host, feed, feeds, at, r.retry_after_seconds, planned)
                    {
                        Held::Host { fresh: true } => {
                            let cap = t.get(&host).map(|h| h.cap_per_day()).unwrap_or(0.0);
                            tracing::warn!(
                                %host,
                                feed,
                                retry_after_s = r.retry_after_seconds,
                                cap_per_day = cap,
                                "host throttled us (429/503 from several of its feeds): holding it and planning it at half its rate"
                            );
                        }
                        Held::Route if !was_held => tracing::info!(
                            %host,
                            feed,
                            retry_after_s = r.retry_after_seconds,
                            "feed throttled us (429/503): holding this feed, not its host's others"
                        ),
                        _ => {}
                    }
                }
            }
            self.host_answer(r, spec.map(|s| s.host.as_str()));
            if change.gone {
                let url = self
                    .cluster
                    .feeds()
                    .get(feed)
                    .map(|s| s.url.as_str())
                    .unwrap_or_default();
                tracing::warn!(
                    feed,
                    url,
                    "feed answered 410 Gone: no longer fetched (ResumeFeed brings it back)"
                );
                metrics::counter!(m::FEED_HEALTH_EVENTS_TOTAL, "event" => "gone").increment(1);
            } else if change.started_failing {
                tracing::info!(feed, error = %error_of(r), "feed started failing; backing off");
                metrics::counter!(m::FEED_HEALTH_EVENTS_TOTAL, "event" => "failing").increment(1);
            } else if change.recovered {
                tracing::info!(feed, "feed answers again");
                metrics::counter!(m::FEED_HEALTH_EVENTS_TOTAL, "event" => "recovered").increment(1);
            }
            if r.redirect_permanent && !r.redirected_to.is_empty() {
                moves.push((r.feed_id.clone(), r.redirected_to.clone()));
            }
        }
        moves
    }
}

impl State {
    /// Feeds a host's breaker ([`crate::control::outages`]) with one report: a failure to
    /// connect, resolve, agree on TLS or answer in time counts against the host, anything
    /// it answered closes the breaker. Said once per trip and once when it answers again.
    fn host_answer(&mut self, r: &pb::FetchReport, host: Option<&str>) {
        let Some(host) = host.filter(|h| !h.is_empty()) else {
            return;
        };
        let down = &mut self.throttles.down;
        match outcome_label(r.outcome) {
            "network_error" | "timeout" => {
                let feeds = self.bounds.host_feeds.get(host).copied().unwrap_or(1);
                let at = r.finished_unix_ms;
                if let Tripped::Held { until_ms, again } =
                    down.failed(host, &r.feed_id, feeds, at, &error_of(r))
                {
                    let hold = health::human_ms(until_ms - at);
                    if again {
                        tracing::info!(%host, error = %error_of(r), %hold, "host still does not answer: held again, twice as long");
                    } else {
                        tracing::warn!(%host, feeds, error = %error_of(r), %hold, "host does not answer (several of its feeds failed in a row): holding all its feeds, then probing it");
                    }
                    let event = if again { "again" } else { "down" };
                    metrics::counter!(m::HOST_BREAKER_EVENTS_TOTAL, "event" => event).increment(1);
                }
            }
            // The worker refused the address: nothing was asked of the host.
            "forbidden_target" | "unspecified" => {}
            _ => {
                if down.answered(host) {
                    tracing::info!(%host, "host answers again: its feeds are fetched as planned");
                    metrics::counter!(m::HOST_BREAKER_EVENTS_TOTAL, "event" => "up").increment(1);
                }
            }
        }
    }
}

impl<B: KvBackend> Hub<B> {
    /// A feed that moved for good (301/308 all the way): its stored URL follows, or, when
    /// another registered feed already has that URL, its subscribers move there and the
    /// duplicate is removed (its stored postings stay readable under its old id).
    pub(super) async fn follow_move(&self, feed: &str, to: &str) {
        let result = async {
            let Ok((url, _)) = check_url(to) else {
                return Ok::<&str, anyhow::Error>("refused");
            };
            let current = self.registry.get_feed(feed).await?;
            if current.url == url {
                return Ok("unchanged");
            }
            let existing = self
                .registry
                .feed_by_url(&url)
                .await?
                .filter(|f| f.id != feed);
            match existing {
                Some(other) => {
                    for user in self.registry.subscribers(feed).await? {
                        match self.registry.subscribe(&user, &other.id).await {
                            Ok(()) | Err(crate::registry::RegistryError::AlreadyExists(_)) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    // As RemoveFeed does: out of the registry and of the reader statistics.
                    self.remove_feed(feed).await?;
                    tracing::info!(feed, into = %other.id, %url, "feed moved onto a registered feed: merged");
                    Ok("merged")
                }
                None => {
                    self.registry.set_feed_url(feed, &url).await?;
                    tracing::info!(feed, from = %current.url, to = %url, "feed moved permanently: URL updated");
                    Ok("moved")
                }
            }
        }
        .await;
        match result {
            Ok(outcome) => {
                metrics::counter!(m::FEED_REDIRECTS_TOTAL, "result" => outcome).increment(1)
            }
            Err(e) => {
                // The next fetch reports the redirect again, so this is retried.
                tracing::warn!(feed, to, error = %e, "could not follow a permanent redirect");
                metrics::counter!(m::FEED_REDIRECTS_TOTAL, "result" => "error").increment(1);
            }
        }
    }

    /// Clears a feed's failure state so the next replan plans it again.
    pub async fn resume_feed(&self, feed: &str) -> anyhow::Result<()> {
        let _writer = self.learned_writes.lock().await;
        let current = self
            .actor
            .ask(super::messages::LearnedState(feed.to_string()))
            .await;
        let mut st = current.unwrap_or_default();
        st.health = Health {
            hints: st.health.hints.clone(),
            ..Health::default()
        }
        .into();
        self.store
            .batch(vec![crate::store::Op::Put(
                crate::store::keys::Key::Learned(feed).encode()?,
                serde_json::to_vec(&st).expect("feed state serializes"),
            )])
            .await?;
        self.actor
            .ask(super::messages::InstallLearned {
                feed: feed.to_string(),
                state: st,
            })
            .await;
        tracing::info!(feed, "feed resumed by an operator");
        Ok(())
    }
}

impl State {
    /// Hosts clear of throttling for a day recover; returns a copy of the throttles and the
    /// operators' limits for a round's bounds.
    pub(super) fn throttles_for_round(
        &mut self,
        now_ms: i64,
    ) -> (HostThrottles, HashMap<String, f64>) {
        for host in self.throttles.recover(now_ms) {
            tracing::info!(%host, "throttled host back at its full rate");
        }
        m::gauge_throttled(
            self.throttles.len(),
            self.throttles.routes_held(now_ms),
            self.throttles.down.held_count(now_ms),
        );
        (self.throttles.clone(), self.host_limits.clone())
    }
}

/// Drops gone feeds from what is planned; returns the bounds of the rest (same order), and
/// the caps of throttled or limited hosts by host name.
pub(super) fn plan_bounds(
    feeds: &mut Vec<FeedRecord>,
    states: &HashMap<String, Arc<FeedState>>,
    throttles: &HostThrottles,
    limits: &HashMap<String, f64>,
    now_ms: i64,
    policy: &HealthPolicy,
) -> (Vec<Bounds>, HashMap<String, f64>) {
    let before = feeds.len();
    feeds.retain(|f| !states.get(&f.id).is_some_and(|s| s.health.is_gone()));
    let mut status: HashMap<&str, usize> = HashMap::new();
    for f in feeds.iter() {
        let s = states.get(&f.id);
        let st = s.map_or("new", |s| {
            s.health
                .status(s.last_answered_ms.is_some(), now_ms, policy)
        });
        *status.entry(st).or_default() += 1;
    }
    *status.entry("gone").or_default() += before - feeds.len();
    m::gauge_feed_health(&status);
    let mut caps: HashMap<String, f64> = throttles
        .iter()
        .map(|(h, t)| (h.clone(), t.cap_per_day()))
        .collect();
    for (h, &limit) in limits {
        let cap = caps.entry(h.clone()).or_insert(limit);
        *cap = cap.min(limit);
    }
    let bounds = feeds
            .iter()
            .map(|f| {
                let mut b = states
                    .get(&f.id)
                    .map(|s| s.health.bounds(policy))
                    .unwrap_or_default();
                if let Some(t) = throttles.get(&f.host) {
                    let held = if t.until_ms > now_ms {
                        b.not_before_ms = Some(b.not_before_ms.unwrap_or(0).max(t.until_ms));
                        format!(", held for {}", health::human_ms(t.until_ms - now_ms))
                    } else {
                        String::new()
                    };
                    b.reasons.push(format!(
                        "host {} throttled us (429/503, {} times): planned at most {:.1} fetches a day{held}",
                        f.host,
                        t.throttles,
                        t.cap_per_day()
                    ));
                }
                if let Some(o) = throttles.down.held(&f.host, now_ms) {
                    b.not_before_ms = Some(b.not_before_ms.unwrap_or(0).max(o.until_ms));
                    b.reasons.push(format!(
                        "host {} does not answer ({}; {} holds in a row): held for {}, then probed",
                        f.host,
                        o.error,
                        o.trips,
                        health::human_ms(o.until_ms - now_ms)
                    ));
                }
                if let Some(r) = throttles.route(&f.host, &f.id, now_ms) {
                    b.not_before_ms = Some(b.not_before_ms.unwrap_or(0).max(r.until_ms));
                    b.reasons.push(format!(
                        "this feed throttled us (429/503, {} times): held for {}; its host's other feeds are not",
                        r.throttles,
                        health::human_ms(r.until_ms - now_ms)
                    ));
                }
                if let Some(limit) = limits.get(&f.host) {
                    b.reasons.push(format!(
                        "host {} limited by an operator to {limit} fetches a day (all its feeds together)",
                        f.host
                    ));
                }
                b
            })
            .collect();
    (bounds, caps)
}

/// After a plan: every spec gets its hold and skip masks (offsets leave skipped hours);
/// returns the bounds and per-host rates, kept for inspection and throttling.
pub(super) fn decorate(
    outcome: &mut PlanOutcome,
    feeds: &[FeedRecord],
    bounds: Vec<Bounds>,
    states: &HashMap<String, Arc<FeedState>>,
    policy: &HealthPolicy,
) -> FeedBounds {
    let mut host_rates: HashMap<String, f64> = HashMap::new();
    let mut host_feeds: HashMap<String, usize> = HashMap::new();
    let mut kept = HashMap::with_capacity(feeds.len());
    for (f, b) in feeds.iter().zip(bounds) {
        if let Some(spec) = outcome.specs.get_mut(&f.id) {
            decorate_spec(spec, &b, states.get(&f.id).map(|s| &*s.health), policy);
            *host_rates.entry(spec.host.clone()).or_default() +=
                spec.offsets_seconds.len() as f64 * 86_400.0 / spec.period_seconds;
            *host_feeds.entry(spec.host.clone()).or_default() += 1;
        }
        kept.insert(f.id.clone(), b);
    }
    let bounded = kept.values().filter(|b| b.max_per_day.is_some()).count();
    m::gauge_bounded_feeds(bounded);
    FeedBounds {
        bounds: kept,
        host_rates,
        host_feeds,
    }
}

fn decorate_spec(
    spec: &mut FeedSpec,
    b: &Bounds,
    h: Option<&Health>,
    policy: &health::HealthPolicy,
) {
    spec.not_before_unix_ms = b.not_before_ms.unwrap_or(0);
    let (hours, days) = h.map(|h| h.skip_masks(policy)).unwrap_or((0, 0));
    spec.skip_hours = hours;
    spec.skip_days = days;
    spec.offsets_seconds =
        health::shift_out_of_skipped_hours(&spec.offsets_seconds, hours, spec.period_seconds);
}

/// Applies bounds to models built for `feeds` and maps host caps by name onto the models'
/// host indices.
pub(super) fn bound_models(
    feeds: &[FeedRecord],
    models: &mut [FeedModel],
    bounds: &[Bounds],
    caps: &HashMap<String, f64>,
    days_per_period: f64,
) -> HashMap<u32, f64> {
    health::apply_bounds(models, bounds, days_per_period);
    let mut by_index = HashMap::new();
    for (f, m) in feeds.iter().zip(models.iter()) {
        if let (Some(cap), Some(h)) = (caps.get(&f.host), m.host) {
            by_index.insert(h, *cap);
        }
    }
    by_index
}
