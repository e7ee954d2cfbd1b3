//! The live coordinator on a recorded trace, on a virtual clock: what `standalone` would do
//! with the trace's feeds and readers, from an empty store, in seconds instead of weeks.
//!
//! The real [`Hub`] (registry, report ingest, relearning, incremental replanning, access
//! statistics) runs over an in-memory store with a manual clock, and the worker's own
//! [`Schedule`] decides when each feed is fetched: once at first sight, then at the times of
//! the hub's current plan, applied as deltas at each replan. This driver plays the rest of
//! the worker: it answers each fetch with the feed's document at
//! that moment — its last `document_items` postings of the trace, dated, with stable ids —
//! through the same report path real workers use; a feed re-solved after its fetch
//! ([`kairos_coordinator::control::quick`]) gets its new times at once, as a worker's delta would. Reader accesses of the trace reach the hub
//! at their times. Replans happen every `replan_every` simulated seconds.
//!
//! What it leaves out: HTTP and politeness timing (fetches happen exactly on time, so
//! lateness is zero), failures, and conditional GETs. Its measure is the fetch log: every
//! posting waits until the first fetch after it, as in [`kairos_coordinator::simulate::replay`], so the
//! live figures sit next to uniform polling and an offline plan on the same days.

use kairos_coordinator::access::AccessEvent;
use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::relearn::PlannerSettings;
use kairos_coordinator::control::FeedSpec;
use kairos_coordinator::hub::{Hub, HubConfig};
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_coordinator::trace::Trace;
use kairos_proto::v1 as pb;
use kairos_runtime::allowance::DAY_MS;
use kairos_runtime::clock::SimClock;
use kairos_runtime::schedule::{FeedTimes, Schedule};
use std::sync::Arc;
use std::time::Duration;

pub use kairos_coordinator::trace::TRACE_ORIGIN_MS;

/// Replay settings.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The live planner's settings.
    pub planner: PlannerSettings,
    /// Simulated seconds between replans.
    pub replan_every: f64,
    /// Items a feed's document holds.
    pub document_items: usize,
    /// Simulated seconds to replay from the trace start.
    pub duration: f64,
    /// No replan after this many simulated seconds: the last plan stands.
    pub freeze_after: Option<f64>,
}

/// What the replay did: each feed's fetch times (seconds from the trace start).
#[derive(Clone, Debug, Default)]
pub struct ReplayLog {
    /// Fetch times per feed, ascending.
    pub fetches: Vec<Vec<f64>>,
    /// Replans made.
    pub replans: usize,
    /// Fetches the day's allowance held to the next day, per simulated day (a fetch held
    /// on two days counts on both): how far the plans asked beyond the budget.
    pub held_by_day: Vec<u64>,
    /// Fetches reported.
    pub reports: u64,
    /// Feeds whose fetch times changed between rounds (re-solved after a fetch surprised
    /// their model).
    pub respecs_between_rounds: u64,
    /// Postings the hub ingested.
    pub postings_ingested: u64,
    /// The hub's own realized average delay over trusted postings, minutes.
    pub hub_avg_delay_min: f64,
    /// Pseudo-days of shrinkage of the last replan of each simulated day.
    pub shrinkage_by_day: Vec<f64>,
    /// Pseudo-postings of the host level at each day's last replan (0: left out).
    pub host_prior_by_day: Vec<f64>,
    /// Half-life (days; 0: none) of the last replan of each simulated day.
    pub half_life_by_day: Vec<f64>,
    /// Feeds whose regime rose and fell ([`crate::hub::PlanFigures::regime_feeds`]) at the
    /// last replan of each simulated day.
    pub regime_feeds_by_day: Vec<Option<(usize, usize)>>,
    /// The plans' record (delivered over promised delay) at the last replan of each day.
    pub promise_ratio_by_day: Vec<f64>,
    /// The plans' own expected delay per posting (minutes; `delay` metric), averaged over
    /// the replans of each simulated day: what the model promised, next to what happened.
    pub expected_delay_min_by_day: Vec<f64>,
    /// The postings the plans expected to scroll off documents unseen, per day, averaged
    /// over the replans of each simulated day.
    pub expected_lost_by_day: Vec<f64>,
    /// Each replan's time (ms since the trace's start) and every feed's expected delay per
    /// posting under it (seconds, by feed index; NaN: not planned): what the plan in force
    /// promised each posting, to weigh by the postings that came.
    pub expected_by_replan: Vec<(i64, Vec<f64>)>,
    /// Rounds that found feeds overdue ([`crate::hub::PlanFigures::overdue_feeds`]), the
    /// most one found and that round's time (ms since the trace's start).
    pub overdue_rounds: usize,
    /// See `overdue_rounds`.
    pub overdue_most: (usize, i64),
    /// From day 1 on, each round's plan's quietest and busiest of its next seven days over
    /// the day's budget ([`kairos_coordinator::hub::PlanFigures::day_budget_shares`]).
    pub day_budget_shares: Vec<(f64, f64)>,
    /// Fetches besides the plan the worker's share of the per-minute cap held to a later
    /// minute (one held twice counts twice).
    pub deferred_by_minute_cap: u64,
    /// When the fetches besides the plan's times started (trace seconds), every feed's,
    /// and how long each waited past its time (seconds; a share of the per-minute cap holds
    /// them to minutes with room).
    pub besides_plan: Vec<(f64, f64)>,
}

/// The fetch times the hub assigned a feed, as the worker's schedule holds them.
fn feed_times(s: &FeedSpec) -> FeedTimes {
    FeedTimes::from_seconds(
        &s.id,
        &s.host,
        &s.offsets_seconds,
        s.period_seconds,
        s.origin_unix_ms,
    )
    .with_timed(s.timed)
}

fn item_id(feed: usize, index: usize) -> u64 {
    ((feed as u64) << 32) ^ index as u64 ^ 0x9e37_79b9_7f4a_7c15
}

/// Runs the hub over `trace` as configured. Needs a multi-threaded tokio runtime (the
/// solve runs on the blocking pool).
pub async fn run(trace: &Trace, cfg: &ReplayConfig) -> anyhow::Result<ReplayLog> {
    let ms = |t: f64| TRACE_ORIGIN_MS + (t * 1000.0) as i64;
    let clock = SimClock::manual(TRACE_ORIGIN_MS);
    let store = Arc::new(MemoryBackend::new());
    let hub = Hub::open(
        store,
        clock,
        HubConfig {
            cluster: ClusterConfig {
                // The replay's single worker never loses its lease in wall time.
                lease: Duration::from_secs(3600),
                heartbeat: Duration::from_secs(60),
                ..ClusterConfig::default()
            },
            planner: cfg.planner.clone(),
            replan_interval: Duration::from_secs(3600),
            health: Default::default(),
            // The replay keeps every posting: it measures from the fetch log.
            retention: kairos_coordinator::retention::Retention {
                postings: None,
                markers: None,
                ..Default::default()
            },
            // One hub for the whole replay: no later leader to hand a plan to.
            plan_snapshot_every: None,
            // Its feeds' URLs are host names under `.invalid`.
            private_allowed: Vec::new(),
        },
    )
    .await?;
    let ids: Vec<String> = trace.feeds.iter().map(|f| f.id.clone()).collect();
    let id_list = Arc::new(ids.clone());
    for (f, row) in trace.feeds.iter().enumerate() {
        // One politeness group per feed unless the trace names hosts.
        let host = row
            .host
            .as_deref()
            .map_or_else(|| format!("h{f}"), url_host);
        hub.add_feed(
            Some(&row.id),
            &format!("http://{host}.replay.invalid/{}", url_path(&row.id)),
            row.weight,
        )
        .await?;
    }
    for (u, (id, w)) in trace.users.iter().enumerate() {
        hub.add_user(id, *w).await?;
        for &f in &trace.subscriptions[u] {
            hub.registry().subscribe(id, &ids[f as usize]).await?;
        }
    }
    let (worker, _) = hub.register("replay", 1.0).await?;

    let mut log = ReplayLog {
        fetches: vec![Vec::new(); trace.feeds.len()],
        ..ReplayLog::default()
    };
    let index: std::collections::HashMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(f, id)| (id.as_str(), f))
        .collect();
    // The worker's own schedule: first-sight fetches, replans applied as deltas, a slot
    // right after a fetch just made skipped, an overdue feed caught up.
    let mut schedule = Schedule::new(0);
    let mut specs: Vec<Option<kairos_coordinator::control::FeedSpec>> =
        vec![None; trace.feeds.len()];
    let mut version = 0u64;
    let mut reported = vec![0usize; trace.feeds.len()];
    // The first-fetch time each feed was expedited to.
    let mut first_at: Vec<Option<i64>> = vec![None; trace.feeds.len()];
    let end_ms = (cfg.duration * 1000.0) as i64;
    let freeze_ms = cfg.freeze_after.map_or(i64::MAX, |f| (f * 1000.0) as i64);
    let step_ms = (cfg.replan_every * 1000.0) as i64;
    let mut next_replan = 0i64;
    let mut expected: Vec<(f64, usize)> = Vec::new();
    let mut expected_lost: Vec<f64> = Vec::new();
    let mut access_i = 0usize;
    let mut seq = 0u64;
    loop {
        let next_fetch = schedule
            .next_due()
            .map(|t| t - TRACE_ORIGIN_MS)
            .unwrap_or(i64::MAX);
        let next_access = trace
            .accesses
            .get(access_i)
            .map(|a| (a.ts * 1000.0) as i64)
            .unwrap_or(i64::MAX);
        // At equal times the replan goes first.
        let t = next_fetch.min(next_access).min(next_replan);
        if t >= end_ms {
            break;
        }
        let now = TRACE_ORIGIN_MS + t;
        clock.set_ms(now);
        if t == next_replan {
            next_replan = if next_replan + step_ms > freeze_ms {
                i64::MAX
            } else {
                next_replan + step_ms
            };
            hub.heartbeat(&worker, 0).await?;
            hub.replan().await?;
            log.replans += 1;
            if cfg.planner.metric == kairos_coordinator::plan::Metric::Delay {
                let per_feed = hub.expected_delays(id_list.clone()).await;
                log.expected_by_replan.push((t, per_feed));
            }
            if let Some(p) = hub.totals().await.last_plan {
                let day = (t / 86_400_000) as usize;
                log.shrinkage_by_day.resize(day + 1, f64::NAN);
                log.shrinkage_by_day[day] = p.shrinkage_days;
                log.host_prior_by_day.resize(day + 1, f64::NAN);
                log.host_prior_by_day[day] = p.host_prior_postings;
                log.half_life_by_day.resize(day + 1, f64::NAN);
                log.half_life_by_day[day] = p.half_life_days;
                log.regime_feeds_by_day.resize(day + 1, None);
                log.regime_feeds_by_day[day] = Some(p.regime_feeds);
                log.promise_ratio_by_day.resize(day + 1, f64::NAN);
                log.promise_ratio_by_day[day] = p.promise_ratio;
                expected.resize(day + 1, (0.0, 0));
                expected[day].0 += p.expected_delay_seconds / 60.0;
                expected[day].1 += 1;
                expected_lost.resize(day + 1, 0.0);
                expected_lost[day] += p.expected_lost_per_day;
                if day >= 1 {
                    log.day_budget_shares.push(p.day_budget_shares);
                }
                if p.overdue_feeds > 0 {
                    log.overdue_rounds += 1;
                    if p.overdue_feeds > log.overdue_most.0 {
                        log.overdue_most = (p.overdue_feeds, t);
                    }
                }
            }
            let mut upserts = Vec::new();
            let mut first = Vec::new();
            for (f, spec) in hub.feed_specs(ids.clone()).await.into_iter().enumerate() {
                if spec == specs[f] {
                    continue;
                }
                if let Some(s) = &spec {
                    // As the worker does: a feed never fetched is fetched when the hub
                    // paced its first fetch (at once without a time), again if it moves.
                    let t = s.first_fetch_unix_ms;
                    if log.fetches[f].is_empty()
                        && (first_at[f].is_none() || (t != 0 && first_at[f] != Some(t)))
                    {
                        first_at[f] = Some(t);
                        first.push((s.id.clone(), t.max(now)));
                    }
                    upserts.push(feed_times(s));
                }
                specs[f] = spec;
            }
            version += 1;
            schedule.apply_delta(version, upserts, &[], now)?;
            schedule.set_allowance(hub.allowance(&worker).await, now);
            // A day short of its budget is read from what the plan still places in it at
            // each round beside what the worker started (docs/RUNTIME.md).
            if tracing::enabled!(tracing::Level::DEBUG) {
                let day_end = (now.div_euclid(DAY_MS) + 1) * DAY_MS;
                let between = |from: i64, to: i64| -> u64 {
                    specs
                        .iter()
                        .flatten()
                        .map(|s| {
                            kairos_coordinator::control::capacity::fetches_between(s, from, to)
                        })
                        .sum()
                };
                tracing::debug!(
                    day = t / DAY_MS,
                    hour = (t % DAY_MS) / 3_600_000,
                    started_today = schedule.gate().started_today(),
                    plan_rest_of_day = between(now, day_end),
                    plan_next_day = between(day_end, day_end + DAY_MS),
                    "replan"
                );
            }
            for (id, at) in first {
                schedule.expedite(&id, at);
            }
            continue;
        }
        if t == next_access {
            let a = &trace.accesses[access_i];
            access_i += 1;
            hub.record_access(vec![AccessEvent {
                user_id: trace.users[a.user as usize].0.clone(),
                feed_id: a.feed.map(|f| ids[f as usize].clone()).unwrap_or_default(),
                unix_ms: ms(a.ts),
            }])
            .await;
            continue;
        }
        let held_before = schedule.gate().held_total();
        let due_now = schedule.pop_due(now);
        let held = schedule.gate().held_total() - held_before;
        if held > 0 {
            let day = (t / DAY_MS) as usize;
            if log.held_by_day.len() <= day {
                log.held_by_day.resize(day + 1, 0);
            }
            log.held_by_day[day] += held;
        }
        for due in due_now {
            let Some(&f) = index.get(due.feed_id.as_str()) else {
                continue;
            };
            // The document now: the newest `document_items` postings published so far.
            let posts = &trace.postings[f];
            let upto = posts.partition_point(|&p| p * 1000.0 <= t as f64);
            let from = upto.saturating_sub(cfg.document_items);
            let fresh = reported[f].max(from);
            let new_postings: Vec<pb::Posting> = (fresh..upto)
                .map(|i| pb::Posting {
                    item_id_hash: item_id(f, i),
                    link: String::new(),
                    title: String::new(),
                    published_unix_ms: Some(ms(posts[i])),
                    discovered_unix_ms: now,
                })
                .collect();
            reported[f] = upto;
            seq += 1;
            let report = pb::FetchReport {
                feed_id: ids[f].clone(),
                outcome: pb::FetchOutcome::Ok as i32,
                http_status: 200,
                scheduled_unix_ms: due.planned_ms,
                started_unix_ms: now,
                finished_unix_ms: now,
                new_postings,
                items_in_document: (upto - from) as u32,
                ..Default::default()
            };
            let ack = hub
                .handle_reports(
                    &worker,
                    vec![pb::ReportMessage {
                        worker_id: worker.clone(),
                        seq,
                        epoch: 0,
                        body: Some(pb::report_message::Body::Fetch(report)),
                    }],
                )
                .await?;
            if !ack.rejected.is_empty() {
                anyhow::bail!("the hub refused a replayed report: {:?}", ack.rejected);
            }
            log.reports += 1;
            log.fetches[f].push(t as f64 / 1000.0);
            if due.besides_plan {
                let waited = (now - due.planned_ms).max(0) as f64 / 1000.0;
                log.besides_plan.push((t as f64 / 1000.0, waited));
            }
            // A fetch that surprised the feed's model re-solves it at once: its new times
            // reach the worker now, as an assignment delta would.
            let spec = hub.feed_specs(vec![ids[f].clone()]).await.pop().flatten();
            if spec != specs[f] {
                if let Some(s) = &spec {
                    version += 1;
                    let times = feed_times(s);
                    schedule.apply_delta(version, vec![times], &[], now)?;
                    log.respecs_between_rounds += 1;
                }
                specs[f] = spec;
            }
        }
    }
    let totals = hub.totals().await;
    log.postings_ingested = totals.postings_new;
    log.hub_avg_delay_min = if totals.delay_count > 0 {
        totals.delay_sum_ms / totals.delay_count as f64 / 60_000.0
    } else {
        0.0
    };
    log.expected_delay_min_by_day = expected
        .iter()
        .map(|&(sum, n)| if n > 0 { sum / n as f64 } else { f64::NAN })
        .collect();
    log.expected_lost_by_day = expected
        .iter()
        .zip(&expected_lost)
        .map(|(&(_, n), &sum)| if n > 0 { sum / n as f64 } else { f64::NAN })
        .collect();
    log.deferred_by_minute_cap = schedule.minutes().deferred_total();
    Ok(log)
}

/// A trace's host as a name a URL can carry, one politeness group per host: a name of
/// letters, digits, dots and dashes as it is; anything else (a port, `owner/repo`) with
/// other characters made dashes and a hash of the whole name after, so two hosts stay two.
pub(crate) fn url_host(host: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    let label_ok = host
        .split('.')
        .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-') && l.len() <= 63);
    if !host.is_empty() && host.chars().all(plain) && label_ok && host.len() <= 200 {
        return host.to_string();
    }
    let cleaned: String = host
        .chars()
        .take(40)
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let hash = xxhash_rust::xxh3::xxh3_64(host.as_bytes());
    format!("x{cleaned}-{hash:016x}")
}

/// A feed id as a URL path segment: unreserved characters as they are, the rest
/// percent-encoded, so an id with `?`, `#`, `/` or a space still names one URL.
pub(crate) fn url_path(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn any_trace_host_and_feed_id_make_a_url_and_distinct_ones_stay_distinct() {
        use super::{url_host, url_path};
        assert_eq!(url_host("h7"), "h7");
        assert_eq!(url_host("blog.example.org"), "blog.example.org");
        let odd = [
            "127.0.0.1:45419",
            "127.0.0.1:45420",
            "google/dawn",
            "-x",
            "a..b",
            "",
            "é",
            &"y".repeat(300),
        ];
        let mut seen = std::collections::HashSet::new();
        for h in odd {
            let u = format!(
                "http://{}.replay.invalid/{}",
                url_host(h),
                url_path("a b/c?d#e,é")
            );
            let parsed = url::Url::parse(&u).unwrap_or_else(|e| panic!("{h:?}: {u}: {e}"));
            assert_eq!(parsed.path(), "/a%20b%2Fc%3Fd%23e%2C%C3%A9", "{u}");
            assert!(
                parsed.fragment().is_none() && parsed.query().is_none(),
                "{u}"
            );
            assert!(
                seen.insert(parsed.host_str().unwrap().to_string()),
                "{h:?} collides"
            );
        }
        assert_eq!(url_path("f0-a_b.c~"), "f0-a_b.c~");
    }

    use super::*;
    use kairos_coordinator::trace::FeedRow;

    const DAY: f64 = 86_400.0;

    /// Ninety-nine feeds posting twice a day at their own hours, and one silent for six
    /// days that then, ten minutes after the round of day 6, posts a dozen times a day.
    fn waking() -> Trace {
        let mut postings: Vec<Vec<f64>> = (1..100)
            .map(|f| {
                (0..14)
                    .flat_map(|d| {
                        let h = (f * 5 % 24) as f64;
                        [
                            d as f64 * DAY + h * 3600.0,
                            d as f64 * DAY + (h + 6.5) * 3600.0,
                        ]
                    })
                    .collect()
            })
            .collect();
        let wake: Vec<f64> = (0..96)
            .map(|i| 6.0 * DAY + 600.0 + i as f64 * 7_200.0)
            .collect();
        postings.insert(0, wake);
        Trace {
            feeds: (0..100)
                .map(|f| FeedRow {
                    id: format!("f{f}"),
                    weight: 1.0,
                    host: None,
                })
                .collect(),
            postings,
            users: Vec::new(),
            subscriptions: Vec::new(),
            accesses: Vec::new(),
            end_ts: 14.0 * DAY,
        }
    }

    fn replay(quick_updates: bool) -> ReplayLog {
        let cfg = ReplayConfig {
            planner: PlannerSettings {
                budget: kairos_coordinator::control::relearn::Budget::PerFeedPerDay(1.0),
                slots: 96,
                quick_updates,
                ..PlannerSettings::default()
            },
            // Rounds three days apart: the wake-up on day 6 waits for day 9 without them.
            replan_every: 3.0 * DAY,
            document_items: 50,
            duration: 12.0 * DAY,
            freeze_after: None,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run(&waking(), &cfg)).unwrap()
    }

    #[test]
    fn a_feed_that_wakes_up_is_re_solved_before_the_next_round_only_with_quick_updates() {
        let (off, on) = (replay(false), replay(true));
        assert_eq!(off.respecs_between_rounds, 0);
        assert!(on.respecs_between_rounds > 0);
        // The woken feed's times moved between the rounds of days 6 and 9.
        let between = |log: &ReplayLog| -> Vec<f64> {
            log.fetches[0]
                .iter()
                .copied()
                .filter(|&t| t > 6.0 * DAY && t < 9.0 * DAY)
                .collect()
        };
        assert_ne!(between(&off), between(&on));
        // The rounds still happen at the same times, and the budget holds: raises are
        // within their share, and the allowances bound each day.
        assert_eq!(off.replans, on.replans);
        let total = |log: &ReplayLog| log.fetches.iter().map(Vec::len).sum::<usize>();
        assert!(
            total(&on) as f64 <= total(&off) as f64 * 1.02 + 2.0,
            "{} fetches against {}",
            total(&on),
            total(&off)
        );
    }
}
