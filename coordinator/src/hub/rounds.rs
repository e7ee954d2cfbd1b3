//! Relearn + replan rounds and the coordinator's periodic loops.
//!
//! A round reads the registry, takes a snapshot of the learned state and the replanner out
//! of the actor, solves on the blocking pool, and sends the result back as a message that
//! installs the plan. The snapshot shares the feeds' states by pointer, and the readers'
//! access rates are gathered in chunks of feeds, so no single message holds the actor long
//! while 100k feeds are planned.

use super::actor::{panic_text, Parked, State};
#[cfg(test)]
use super::figures::Ledger;
use super::figures::{log_days_over_budget, warn_unspent};
use super::health::FeedBounds;
use super::messages as msg;
use super::{allowances, health, overdue, pacing, Hub, PlanFigures, PlanView};
use crate::control::cluster::Prepared;
use crate::control::relearn::{self, ModelCounts, PlanOutcome, PlannerSettings, Replanner};
use crate::control::FeedSpec;
use crate::control::{capacity, readers};
use crate::metrics as m;
use crate::plan::alloc::AllocError;
use crate::registry::FeedRecord;
use crate::store::KvBackend;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Feeds whose readers' access histograms one message sums: small enough that a message
/// takes well under a millisecond with a few subscribers per feed.
const ACCESS_CHUNK: usize = 2_000;

/// Discovery index entries a retention pass reads per horizon: 10k feeds posting 10 times
/// a day add about 70 a minute.
const PRUNE_BUDGET: usize = 5_000;

/// Batches one retention pass runs at most while it finds a backlog.
const PRUNE_BATCHES: usize = 40;

/// Runs `f` on the replanner, containing a panic inside it: the panic becomes an error of
/// this round and the replanner comes back fresh (the next round solves afresh from the
/// same settings). Without this, one panic in the solver would lose the replanner and every
/// later round would fail until a restart, with the process still up.
fn guarded<T>(
    mut replanner: Replanner,
    f: impl FnOnce(&mut Replanner) -> T,
) -> (Replanner, Result<T, String>) {
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut replanner)));
    match out {
        Ok(v) => (replanner, Ok(v)),
        Err(panic) => {
            let mut fresh = Replanner::new(replanner.settings().clone());
            // The prices are plain numbers, valid whatever the solve that panicked left.
            fresh.resume_day_prices(replanner.day_prices().clone());
            m::record_planner_panic();
            (
                fresh,
                Err(format!(
                    "the planner panicked ({}); the next round solves afresh",
                    panic_text(&panic)
                )),
            )
        }
    }
}

/// What the blocking task hands back besides the replanner: the plan, decorated, with
/// everything its installation needs prepared, so installing it is a few pointer moves.
pub(super) struct Solved {
    /// The round's time, Unix ms.
    now: i64,
    /// Fetches a day the plan was made for.
    per_day: f64,
    /// When each feed never fetched is due for its first fetch.
    first_sights: HashMap<String, i64>,
    /// The latest UTC day that holds first sights.
    paced_day: pacing::Steering,
    outcome: PlanOutcome,
    view: PlanView,
    bounds: FeedBounds,
    figures: PlanFigures,
    /// The workers' desired states, prepared against the cluster as the round found it; or
    /// the plan's specs when its hosts must be re-dealt on the cluster itself.
    desired: Result<Prepared, BTreeMap<String, FeedSpec>>,
    /// What feeds are re-solved with until the next round (none when that is off).
    basis: Option<crate::control::quick::Basis>,
}

/// Runs `work` unless `stop` fires first; `None` when it did. A loop's round, retention pass
/// or compaction can take tens of seconds at 100k feeds, and a deposed leader must stop
/// within seconds (the server gives it 5, then exits): whatever such work was doing is
/// either written already or redone by the next leader (a dropped round hands its
/// replanner back when its solve ends; the stop ends the actor anyway).
async fn until_stopped<T>(
    stop: &mut tokio::sync::watch::Receiver<bool>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        out = work => Some(out),
        _ = stop.wait_for(|s| *s) => None,
    }
}

impl<B: KvBackend> Hub<B> {
    /// One relearn + replan round: models from the learned state, the plan solved on the
    /// blocking pool, and the new fetch times handed to the cluster.
    pub async fn replan(&self) -> anyhow::Result<PlanOutcome> {
        let _round = self.rounds.lock().await;
        let feeds = self.registry.all_feeds().await?;
        let registered = feeds.len();
        let subs = self.registry.all_subscribers().await?;
        let users: HashMap<String, f64> = self
            .registry
            .all_users()
            .await?
            .into_iter()
            .map(|u| (u.id, u.weight))
            .collect();
        m::gauge_registry(registered, users.len());
        let now = self.clock.now_ms();
        // Out of the state only while a round solves: a round whose caller went away may
        // still be solving, and its result message puts the replanner back.
        let parked = loop {
            if let Some(p) = self.actor.ask(msg::TakeReplanner).await {
                break p;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Everything the solve reads, taken in one short message: the states are shared by
        // pointer, the cluster's owners likewise, throttles and limits are small.
        let msg::Inputs {
            states,
            settings: (generation, settings),
            throttles,
            limits,
            shard,
            old_subscribers,
            ledger,
            counted,
            first_sights,
            paced_day,
            push_shares,
        } = self
            .actor
            .ask(msg::RoundInputs {
                now_ms: now,
                subscribers: subs,
            })
            .await;
        // Freed here, not on the actor.
        drop(old_subscribers);
        let feeds = Arc::new(feeds);
        let users = Arc::new(users);
        let mut observed = HashMap::with_capacity(feeds.len());
        for start in (0..feeds.len()).step_by(ACCESS_CHUNK) {
            let end = (start + ACCESS_CHUNK).min(feeds.len());
            observed.extend(
                self.actor
                    .ask(msg::FeedAccess {
                        feeds: feeds.clone(),
                        range: start..end,
                        users: users.clone(),
                    })
                    .await,
            );
        }
        // Hours the access statistics have watched: the prior's weight falls as they grow.
        let exposure = relearn::hour_exposure(self.access_since_ms, now);
        let policy = self.cfg.health.clone();
        let (reply, answer) = tokio::sync::oneshot::channel();
        let actor = self.actor.clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let (replanner, out) = guarded(parked.replanner, |r| {
                if parked.generation != generation {
                    r.set_settings(settings.clone());
                }
                let mut feeds = Arc::unwrap_or_clone(feeds);
                // Gone feeds leave the plan here; the rest carry their back-off, hint and
                // host bounds.
                let (bounds, caps) =
                    health::plan_bounds(&mut feeds, &states, &throttles, &limits, now, &policy);
                let observed: Vec<readers::FeedAccess> = feeds
                    .iter()
                    .map(|f| {
                        observed
                            .remove(&f.id)
                            .unwrap_or_else(|| readers::FeedAccess {
                                observed: vec![0.0; 24],
                                subscriber_weight: 0.0,
                            })
                    })
                    .collect();
                let rates = readers::access_rates(&observed, &exposure, r.settings().shrinkage);
                let rates: HashMap<&str, Vec<f32>> =
                    feeds.iter().map(|f| f.id.as_str()).zip(rates).collect();
                let access_bins =
                    |feed: &str| -> Vec<f32> { rates.get(feed).cloned().unwrap_or_default() };
                let (mut models, counts) = r.models(&feeds, &states, &access_bins, now);
                // A pushed feed's polls are a check: they must find only what its hub
                // misses, so the plan sees that share of its postings.
                super::push::scale_pushed(
                    &feeds,
                    &mut models,
                    &super::push::PushPlanning {
                        shares: &push_shares,
                        states: &states,
                        plan: &r.settings().plan_config(feeds.len()),
                        days_per_period: r.settings().days_per_period(),
                    },
                );
                let days = r.settings().days_per_period();
                let caps = health::bound_models(&feeds, &mut models, &bounds, &caps, days);
                // Feeds with no state yet get a first fetch at sight, off the plan, paced
                // within each day's budget; the plan gets what the day has left.
                let pending: Vec<&str> = feeds
                    .iter()
                    .filter(|f| !states.contains_key(&f.id))
                    .map(|f| f.id.as_str())
                    .collect();
                let days = r.settings().days_per_period();
                let per_day = r.settings().plan_config(feeds.len()).budget / days;
                // Nothing of the day is held back for the plan's minimums: the workers'
                // allowances keep the day within its budget whatever the plan asks, and a
                // feed seen sooner is learned sooner (on `real-commits` at half a fetch a
                // day, holding the minimums back left days 0–2 at 0.72–0.78 of their budget
                // and realized 784.5 min on days 14–55; without it, every day within 2% and
                // 761.6 min).
                let paced = pacing::pace(
                    now,
                    per_day,
                    0.0,
                    &ledger,
                    &pending,
                    &first_sights,
                    paced_day,
                );
                r.set_budget_share(paced.share);
                let mut outcome = match paced.rest_of_day {
                    // On a day the share steers, a plan that leaves part of the day's room
                    // unplanned is made again at the share that fills it. The models are
                    // kept for that second plan only where the share could still rise (a
                    // million feeds' models held twice are the learner's peak).
                    Some((room, day_end))
                        if pacing::refill_share(paced.share, room, 0.0).is_some() =>
                    {
                        let first = r.plan_with_caps(&feeds, models.clone(), caps.clone())?;
                        let planned = pacing::planned_between(first.specs.values(), now, day_end);
                        match pacing::refill_share(paced.share, room, planned) {
                            Some(share) => {
                                r.set_budget_share(share);
                                r.plan_with_caps(&feeds, models, caps)?
                            }
                            None => first,
                        }
                    }
                    _ => r.plan_with_caps(&feeds, models, caps)?,
                };
                for (id, spec) in outcome.specs.iter_mut() {
                    if let Some(&t) = paced.first_sights.get(id) {
                        spec.first_fetch_unix_ms = t;
                    }
                }
                let bounds = health::decorate(&mut outcome, &feeds, bounds, &states, &policy);
                let late = overdue::overdue(
                    outcome.specs.values(),
                    &states,
                    r.settings().min_fetches_per_day,
                    now,
                );
                // Against the day's budget at the share the plan was made with: a plan
                // refilled to spend the rest of today asks that much of later days too,
                // until the next round, and is not uneven for it.
                let shares = capacity::days_against_budget(
                    outcome.specs.values(),
                    now,
                    per_day * outcome.budget_share,
                );
                let figures = figures_of(&outcome, &counts, r.settings(), started, late, shares);
                // The day's budget dealt over the workers: the hard part of it.
                let budget = allowances::DayBudget {
                    now_ms: now,
                    per_day,
                    today: ledger.today(now),
                    counted: &counted,
                    first_sights: &paced.first_sights,
                    per_minute: r.settings().max_fetches_per_minute,
                };
                let desired =
                    shard.prepare(outcome.specs.clone(), &|w| allowances::deal(&budget, w));
                Ok::<_, AllocError>(Solved {
                    now,
                    per_day,
                    paced_day: paced.paced_day,
                    first_sights: paced.first_sights,
                    outcome,
                    view: r.view(),
                    bounds,
                    figures,
                    desired,
                    basis: r
                        .settings()
                        .quick_updates
                        .then(|| r.quick_basis())
                        .flatten(),
                })
            });
            // The result comes back as a message, whether or not the caller still waits:
            // the replanner returns to the state and a plan solved is installed.
            actor.tell(msg::RoundSolved {
                parked: Parked {
                    generation,
                    replanner,
                },
                solved: match out {
                    Ok(Ok(solved)) => Ok(solved),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(e) => Err(e),
                },
                reply,
            });
        });
        answer.await.map_err(|_| {
            anyhow::anyhow!("the planning round was lost: the control plane stopped")
        })?
    }

    /// Runs the coordinator's periodic work until `stop` fires, in three loops on tasks of
    /// their own, so that a long round (tens of seconds at 100k feeds) or a retention backlog
    /// never holds up lease expiry: replanning every `replan_interval`; worker leases every
    /// half second and the capacity gauge; and the store's upkeep (access statistics every
    /// minute, retention, compaction).
    pub async fn run_loops(self: Arc<Self>, stop: tokio::sync::watch::Receiver<bool>) {
        let replans = tokio::spawn(self.clone().replan_loop(stop.clone()));
        let upkeep = tokio::spawn(self.clone().upkeep_loop(stop.clone()));
        // WebSub subscriptions: every simulated minute, within 0.2–5 s of wall time.
        let every = Duration::from_secs_f64((60.0 / self.clock.scale()).clamp(0.2, 5.0));
        let push = tokio::spawn(self.clone().push_loop(every, stop.clone()));
        self.clone().session_loop(stop).await;
        for (name, task) in [
            ("replan", replans),
            ("store upkeep", upkeep),
            ("push", push),
        ] {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "the {name} loop ended abnormally");
            }
        }
        // What a graceful stop would otherwise lose.
        if let Err(e) = self.persist_access().await {
            tracing::error!(error = %e, "access statistics of the last minute not stored at shutdown");
        }
    }

    async fn replan_loop(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut replan = tokio::time::interval(self.cfg.replan_interval);
        // A round longer than the interval is followed by the next one, not by a burst.
        replan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stored_at: Option<(Instant, usize)> = None;
        loop {
            tokio::select! {
                _ = replan.tick() => {
                    let round = async {
                        match self.replan().await {
                            Ok(outcome) => self.store_plan(outcome, &mut stored_at).await,
                            Err(e) => {
                                // Keep the previous plan; the next round tries again.
                                m::record_replan_failure();
                                tracing::error!(error = %e, "replan failed; keeping the previous plan");
                            }
                        }
                    };
                    if until_stopped(&mut stop, round).await.is_none() {
                        break;
                    }
                }
                _ = stop.changed() => break,
            }
        }
    }

    /// Writes the plan to the store when the last write is older than
    /// `plan_snapshot_every`, or a tenth of that when the number of feeds planned changed
    /// (an import: the feeds it added would otherwise wait for a next leader's first round),
    /// and the first plan of a term at once: what a next leader serves while its first
    /// round solves ([`super::stored_plan`]). A failed write is retried after the next
    /// round.
    async fn store_plan(&self, outcome: PlanOutcome, stored_at: &mut Option<(Instant, usize)>) {
        let Some(every) = self.cfg.plan_snapshot_every else {
            return;
        };
        let feeds = outcome.specs.len();
        if let Some((at, stored)) = *stored_at {
            let wait = if stored == feeds { every } else { every / 10 };
            if at.elapsed() < wait {
                return;
            }
        }
        let per_day = outcome.budget_per_day;
        let day_prices = outcome.day_prices;
        let specs = outcome.specs;
        let chunks = match tokio::task::spawn_blocking(move || {
            let chunks = super::stored_plan::encode(&specs);
            // Freed here rather than on the runtime's threads.
            drop(specs);
            chunks
        })
        .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "encoding the plan for the store failed");
                return;
            }
        };
        let bytes = chunks.iter().map(Vec::len).sum::<usize>();
        let promises = self.actor.ask(msg::Promises).await;
        let written = super::stored_plan::write(
            self.store.as_ref(),
            chunks,
            feeds,
            per_day,
            self.clock.now_ms(),
            promises,
            &day_prices,
        )
        .await;
        match written {
            Ok(meta) => {
                m::record_plan_snapshot(Some(bytes));
                *stored_at = Some((Instant::now(), feeds));
                tracing::debug!(generation = meta.generation, bytes, "plan stored");
            }
            Err(e) => {
                m::record_plan_snapshot(None);
                tracing::warn!(error = %e, "plan not stored; retrying after the next round");
            }
        }
    }

    async fn session_loop(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut leases = tokio::time::interval(Duration::from_millis(500));
        // A plan's next hour moves with the clock (compressed in demos and tests).
        let mut capacity = tokio::time::interval(Duration::from_secs(15));
        loop {
            tokio::select! {
                _ = leases.tick() => self.expire_leases().await,
                _ = capacity.tick() => {
                    self.record_capacity().await;
                }
                _ = stop.changed() => break,
            }
        }
    }

    async fn upkeep_loop(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut persist = tokio::time::interval(Duration::from_secs(60));
        let mut prune_cursor = crate::retention::Cursor::default();
        let mut prune = tokio::time::interval(self.cfg.retention.every);
        let mut compact = tokio::time::interval(self.cfg.retention.compact_every);
        loop {
            // The access statistics are stored whole, so they are not cut short; a retention
            // pass or a compaction is, and the next leader's does what it left.
            tokio::select! {
                _ = persist.tick() => {
                    if let Err(e) = self.persist_access().await {
                        tracing::warn!(error = %e, "access statistics not stored; retrying in a minute");
                    }
                }
                _ = prune.tick() => {
                    let pass = self.prune_postings(&mut prune_cursor);
                    if until_stopped(&mut stop, pass).await.is_none() {
                        break;
                    }
                }
                _ = compact.tick() => {
                    let compaction = async {
                        match self.store.compact().await {
                            Ok(Some(rev)) => tracing::info!(revision = rev, "store history compacted"),
                            Ok(None) => {}
                            Err(e) => tracing::warn!(error = %e, "store compaction failed; retrying next interval"),
                        }
                    };
                    if until_stopped(&mut stop, compaction).await.is_none() {
                        break;
                    }
                }
                _ = stop.changed() => break,
            }
        }
    }

    /// One retention pass: postings and item markers past their horizon go, in batches of
    /// at most [`PRUNE_BUDGET`] index entries per horizon, batch after batch while a batch
    /// came back full (a backlog: a burst of postings a week ago, or a compressed clock), up
    /// to [`PRUNE_BATCHES`] batches; the rest next interval.
    async fn prune_postings(&self, cursor: &mut crate::retention::Cursor) {
        let (mut postings, mut markers) = (0, 0);
        for _ in 0..PRUNE_BATCHES {
            let now = self.clock.now_ms();
            match self
                .ingestor
                .prune(now, self.cfg.retention, cursor, PRUNE_BUDGET)
                .await
            {
                Ok(p) => {
                    m::record_pruned(p.postings, p.markers);
                    postings += p.postings;
                    markers += p.markers;
                    if (p.postings as usize) < PRUNE_BUDGET && (p.markers as usize) < PRUNE_BUDGET {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retention pass failed; retrying next interval");
                    break;
                }
            }
        }
        if postings + markers > 0 {
            tracing::info!(postings, markers, "retention: old postings removed");
        }
    }
}

impl State {
    /// The weighted access histograms of each feed's subscribers (at the last round), by
    /// feed.
    pub(super) fn feed_access(
        &self,
        feeds: &[FeedRecord],
        users: &HashMap<String, f64>,
    ) -> Vec<(String, readers::FeedAccess)> {
        feeds
            .iter()
            .map(|f| {
                let mut a = readers::FeedAccess {
                    observed: vec![0.0f32; 24],
                    subscriber_weight: 0.0,
                };
                for u in self.subscribers.get(&f.id).into_iter().flatten() {
                    a.subscriber_weight += users.get(u).copied().unwrap_or(0.0);
                    for h in [
                        self.access.app_histogram(u),
                        self.access.feed_histogram(u, &f.id),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        for (b, v) in a.observed.iter_mut().zip(h) {
                            *b += v;
                        }
                    }
                }
                (f.id.clone(), a)
            })
            .collect()
    }

    /// Installs a solved plan: its view and bounds for inspection, the figures, the fetch
    /// times handed to the cluster. What it replaces is freed on the blocking pool (freeing
    /// 100k specs and models would hold up every other message).
    pub(super) fn install_plan(&mut self, solved: Solved) -> PlanOutcome {
        let Solved {
            now,
            per_day,
            first_sights,
            paced_day,
            outcome,
            view,
            bounds,
            figures,
            desired,
            basis,
        } = solved;
        let figures = figures.recalibrated(self.promises.ratio());
        figures.record();
        m::gauge_plan_from_store(false);
        warn_unspent(&figures, &outcome);
        super::figures::record_crowding(&outcome);
        let overdue_before = self
            .totals
            .last_plan
            .as_ref()
            .map_or(0, |p| p.overdue_feeds);
        overdue::log_change(overdue_before, &figures);
        log_days_over_budget(&mut self.days_over, now, &figures);
        let old_view = std::mem::replace(&mut self.plan_view, view);
        let old_bounds = std::mem::replace(&mut self.bounds, bounds);
        let c = &mut self.cluster;
        let before = c.moves_total();
        let replaced = match desired {
            Ok(prepared) => Some(c.install(prepared)),
            Err(specs) => {
                c.set_feeds(specs);
                None
            }
        };
        m::record_membership(
            c.workers().len(),
            c.moves_total() - before,
            c.spilled_hosts(),
        );
        self.totals.plans += 1;
        self.first_sights = first_sights;
        self.paced_day = paced_day;
        self.budget_per_day = Some(per_day);
        if replaced.is_none() {
            // Hosts were re-dealt: so is the day's budget.
            self.deal_allowances(now);
        }
        self.totals.last_plan = Some(figures);
        self.after_round(now, basis);
        tokio::task::spawn_blocking(move || drop((old_view, old_bounds, replaced)));
        outcome
    }
}

/// The figures of a plan, as reported.
fn figures_of(
    outcome: &PlanOutcome,
    counts: &ModelCounts,
    settings: &PlannerSettings,
    started: Instant,
    late: overdue::Overdue,
    day_shares: Option<(f64, f64)>,
) -> PlanFigures {
    // Spread over the postings the plan's own rates expect, not the raw observed rates:
    // the cost is computed with the shrunk, recency-weighted rates, and dividing it by
    // other rates would mix two models in one figure.
    let posts_per_day = outcome.expected_postings_per_day;
    let model_delay = if posts_per_day > 0.0 {
        outcome.expected_cost / posts_per_day
    } else {
        0.0
    };
    PlanFigures {
        fetches_per_day: outcome.fetches_per_day,
        budget_per_day: outcome.budget_per_day,
        expected_cost: outcome.expected_cost,
        model_expected_delay_seconds: model_delay,
        // The model's own until the plan is installed and recalibrated by the record as
        // it stands then (`PlanFigures::recalibrated`).
        expected_delay_seconds: model_delay,
        promise_ratio: 1.0,
        resolved: outcome.resolved,
        solve_seconds: started.elapsed().as_secs_f64(),
        unspent_per_day: outcome.host_limited.unspent_per_day,
        budget_share: outcome.budget_share,
        hosts_at_cap: outcome.host_limited.hosts_at_cap,
        host_cap_per_day: settings.host_fetches_per_day,
        capacity_floors: counts.capacity_floors,
        capacity_floor_fetches_per_day: counts.capacity_floor_fetches_per_day,
        expected_lost_per_day: outcome.expected_lost_per_day,
        shrinkage_days: counts.shrinkage,
        shrinkage_held_out_days: counts.held_out_days,
        mixture_shapes: counts.mixture_shapes,
        shape_prior_postings: counts.shape_postings,
        host_prior_postings: counts.sibling_postings,
        half_life_days: counts.half_life_days,
        half_life_feeds: counts.half_life_feeds,
        regime_feeds: (counts.regime_rising, counts.regime_falling),
        calibration: (counts.calibrated_feeds, counts.silent_factor),
        rate_prior_mean: counts.rate_prior_mean,
        timer_feeds: counts.timer_feeds,
        week_shapes: settings.weekly.then_some(counts.week_shapes),
        overdue_feeds: late.feeds,
        overdue_longest_seconds: late.longest.as_ref().map_or(0.0, |l| l.0 as f64 / 1000.0),
        overdue_longest_feed: late.longest.map(|l| l.1).unwrap_or_default(),
        day_budget_shares: day_shares.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_counts_each_utc_day_and_closes_the_days_gone() {
        let day = super::super::DAY_MS;
        let mut l = Ledger::default();
        assert_eq!(l.today(0), 0);
        for i in 0..100 {
            l.add(i * day / 100);
        }
        assert_eq!((l.since_ms, l.fetches), (Some(0), 100));
        assert_eq!(l.today(day - 1), 100);
        // The next day starts from nothing; a late report of the day before is counted in
        // the run's total only.
        assert_eq!(l.today(day), 0);
        l.add(day + 5);
        l.add(day - 5);
        assert_eq!((l.today(day + 10), l.fetches), (1, 102));
        // A fetch reported with an earlier start moves the ledger's start back.
        l.add(-day);
        assert_eq!(l.since_ms, Some(-day));
    }

    #[test]
    fn a_reduced_share_keeps_the_minimums_and_reports_the_configured_budget() {
        let feeds: Vec<FeedRecord> = (0..20)
            .map(|i| FeedRecord {
                id: format!("f{i}"),
                url: format!("http://h{i}.test/feed"),
                host: format!("h{i}.test"),
                weight: 1.0,
            })
            .collect();
        let model = crate::plan::planner::FeedModel {
            weight: 1.0,
            post_bins: vec![0.5; 24],
            peaks: Vec::new(),
            access_bins: vec![0.0; 24],
            min_level: crate::plan::alloc::ceil_level(1.0 / 7.0),
            max_level: 96,
            host: None,
            document: None,
        };
        let mut r = Replanner::new(PlannerSettings {
            slots: 96,
            ..PlannerSettings::default()
        });
        let full = r
            .plan_with_caps(&feeds, vec![model.clone(); 20], HashMap::new())
            .unwrap();
        assert!(
            (full.fetches_per_day - 80.0).abs() < 1.0,
            "{}",
            full.fetches_per_day
        );
        r.set_budget_share(0.5);
        let half = r
            .plan_with_caps(&feeds, vec![model.clone(); 20], HashMap::new())
            .unwrap();
        assert!(
            (half.fetches_per_day - 40.0).abs() < 1.0,
            "{}",
            half.fetches_per_day
        );
        assert_eq!(half.budget_per_day, 80.0);
        assert_eq!(half.budget_share, 0.5);
        // Below the minimums (20 feeds once a week): held at them.
        r.set_budget_share(0.0);
        let low = r
            .plan_with_caps(&feeds, vec![model; 20], HashMap::new())
            .unwrap();
        assert!(
            (low.budget_share - 20.0 / 7.0 / 80.0).abs() < 1e-9,
            "{}",
            low.budget_share
        );
        assert!(low.fetches_per_day <= 20.0 / 7.0 + 1e-9);
    }

    #[test]
    fn a_planner_panic_is_an_error_of_the_round_and_leaves_a_usable_replanner() {
        let settings = PlannerSettings {
            slots: 96,
            ..PlannerSettings::default()
        };
        let r = Replanner::new(settings);
        let (r, out) = guarded(r, |_| -> u32 { panic!("boom") });
        let err = out.unwrap_err();
        assert!(err.contains("boom"), "{err}");
        assert_eq!(
            r.settings().slots,
            96,
            "the fresh replanner keeps the settings"
        );
        let (_, out) = guarded(r, |_| 7);
        assert_eq!(out.unwrap(), 7);
    }

    #[tokio::test]
    async fn work_in_a_loop_ends_when_the_stop_fires_not_when_it_is_done() {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        // Work that ends first gives its result.
        assert_eq!(until_stopped(&mut rx, async { 3 }).await, Some(3));
        // Work that would never end gives way to the stop, at once.
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(true).unwrap();
            tx
        });
        let started = Instant::now();
        let out = until_stopped(&mut rx, std::future::pending::<()>()).await;
        assert_eq!(out, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        // A stop already fired holds for later work too.
        let _tx = stopper.await.unwrap();
        assert_eq!(
            until_stopped(&mut rx, std::future::pending::<()>()).await,
            None
        );
    }
}
