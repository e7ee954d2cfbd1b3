//! Between rounds: a feed whose fetch surprised its model is re-solved alone
//! ([`crate::control::quick`]) and its new times go to its worker at once.
//!
//! The updates live beside the last round's plan as overrides. A round that took its
//! snapshot after an update has learned from the same state and replaces it; an update
//! made while a round solved (at 100k feeds a round takes tens of seconds) is applied again
//! over that round's plan, so the round does not undo it.

use super::actor::State;
use super::Hub;
use crate::control::feedstate::FeedState;
use crate::control::quick::{self, Basis, Update};
use crate::control::relearn::{fetch_times, flat};
use crate::metrics as m;
use crate::plan::crowd;
use crate::plan::planner::{FeedModel, FeedPlan};
use crate::store::KvBackend;
use std::collections::HashMap;
use std::sync::Arc;

/// Feeds one batch of reports may re-solve at most; the rest wait for the round (a burst
/// across many feeds at once is what a round is for).
const MAX_PER_BATCH: usize = 64;

/// The updates in force since the last round.
#[derive(Default)]
pub(super) struct Quick {
    /// The last round's population and prices (none before a round, or off).
    pub basis: Option<Arc<Basis>>,
    /// Feeds re-solved since, by id.
    pub overrides: HashMap<String, Override>,
    /// Fetches a day the overrides add to the round's plan.
    pub extra_per_day: f64,
    /// Planned fetches per slot, the round's with the overrides in place of the plans they
    /// replace, when a per-slot capacity is set: what each update is fitted around.
    pub occupancy: Option<crate::plan::occupancy::Occupancy>,
    /// The snapshot times (the hub's clock, Unix ms) of the last two rounds: their gap is
    /// when the next round is expected.
    pub rounds_ms: (Option<i64>, Option<i64>),
}

impl Quick {
    /// When the next round is expected to install: the last one plus the gap between the
    /// last two (`None` before two rounds).
    fn next_round_ms(&self) -> Option<i64> {
        match self.rounds_ms {
            (Some(a), Some(b)) if b > a => Some(b + (b - a)),
            _ => None,
        }
    }
}

/// One feed's plan since its update.
pub(super) struct Override {
    /// When it was made (the hub's clock), Unix ms.
    pub at_ms: i64,
    pub update: Update,
}

/// A fetch that found new postings: what deciding whether it surprised its model needs.
pub(super) struct Found {
    pub feed: String,
    /// The previous answered fetch, Unix ms.
    pub since_ms: i64,
    /// This fetch, Unix ms.
    pub until_ms: i64,
    /// New postings it counted.
    pub postings: usize,
}

/// One feed to re-solve.
pub(super) struct Job {
    feed: String,
    model: FeedModel,
    plan: FeedPlan,
    state: Arc<FeedState>,
}

impl State {
    /// A feed's model and plan in force: its override, else the last round's.
    pub(super) fn model_of(&self, feed: &str) -> Option<(&FeedModel, &FeedPlan)> {
        match self.quick.overrides.get(feed) {
            Some(o) => Some((&o.update.model, &o.update.plan)),
            None => self.plan_view.get(feed).map(|(m, p)| (m, p)),
        }
    }

    /// The fetches of `found` that surprised their feed's model, ready to re-solve.
    pub(super) fn surprises(&self, found: Vec<Found>) -> Option<(Arc<Basis>, Vec<Job>)> {
        let basis = self.quick.basis.clone()?;
        let mut jobs: Vec<Job> = Vec::new();
        for f in found {
            if jobs.len() >= MAX_PER_BATCH || jobs.iter().any(|j| j.feed == f.feed) {
                continue;
            }
            let Some((model, plan)) = self.model_of(&f.feed) else {
                continue;
            };
            if !quick::surprised(model, f.since_ms, f.until_ms, f.postings) {
                continue;
            }
            let Some(state) = self.feeds.get(&f.feed) else {
                continue;
            };
            jobs.push(Job {
                model: model.clone(),
                plan: plan.clone(),
                state: state.clone(),
                feed: f.feed,
            });
        }
        (!jobs.is_empty()).then_some((basis, jobs))
    }

    /// Installs updates made at `now_ms`: those that fetch the feed before the next round
    /// is expected (later, the round re-plans it in time, with the budget balanced), and
    /// raises only while their share of the budget lasts.
    pub(super) fn apply_quick(&mut self, updates: Vec<(String, Update)>, now_ms: i64) {
        let room = quick::QUICK_SHARE * self.budget_per_day.unwrap_or(0.0);
        let next_round = self.quick.next_round_ms();
        let mut times = Vec::with_capacity(updates.len());
        for (feed, mut update) in updates {
            self.fit_quick(&feed, &mut update);
            let next = quick::next_fetch_ms(&update.offsets_seconds, update.period_seconds, now_ms);
            if let (Some(round), Some(next)) = (next_round, next) {
                if next >= round {
                    metrics::counter!(m::PLAN_QUICK_UPDATES_TOTAL, "result" => "deferred")
                        .increment(1);
                    continue;
                }
            }
            let before = self
                .quick
                .overrides
                .get(&feed)
                .map_or(0.0, |o| o.update.change_per_day);
            let extra = self.quick.extra_per_day - before + update.change_per_day;
            let result = if update.change_per_day > 1e-9 {
                if extra > room + 1e-9 {
                    metrics::counter!(m::PLAN_QUICK_UPDATES_TOTAL, "result" => "refused")
                        .increment(1);
                    continue;
                }
                "raised"
            } else if update.change_per_day < -1e-9 {
                "lowered"
            } else {
                // The same number of fetches at the times of the feed's new model: with
                // rounds a day apart, re-timing was most of the gain on `bursts`.
                "kept"
            };
            metrics::counter!(m::PLAN_QUICK_UPDATES_TOTAL, "result" => result).increment(1);
            tracing::debug!(
                feed,
                result,
                fetches_per_day_change = update.change_per_day,
                "fetch surprised the feed's model: re-solved before the next round"
            );
            self.quick.extra_per_day = extra;
            let old = self.model_of(&feed).map(|(_, p)| p.clone());
            if let Some(occ) = self.quick.occupancy.as_mut() {
                if let Some(old) = &old {
                    occ.add_plan(old, -1.0);
                }
                occ.add_plan(&update.plan, 1.0);
            }
            times.push((
                feed.clone(),
                update.offsets_seconds.clone(),
                update.period_seconds,
            ));
            self.quick.overrides.insert(
                feed,
                Override {
                    at_ms: now_ms,
                    update,
                },
            );
        }
        self.cluster.update_times(&times);
        metrics::gauge!(m::PLAN_QUICK_EXTRA_PER_DAY).set(self.quick.extra_per_day);
    }

    /// After a round made from a snapshot at `round_ms` is installed, with `basis` for the
    /// next updates: overrides older than the snapshot go (the round learned from the same
    /// state); later ones are applied again over the round's plan.
    pub(super) fn after_round(&mut self, round_ms: i64, mut basis: Option<Basis>) {
        // The round's counts move here: the updates keep them, the basis needs them no more.
        self.quick.occupancy = basis.as_mut().and_then(|b| b.occupancy.take());
        self.quick.basis = basis.map(Arc::new);
        self.quick.rounds_ms = (self.quick.rounds_ms.1, Some(round_ms));
        self.quick.overrides.retain(|_, o| o.at_ms > round_ms);
        if let Some(occ) = self.quick.occupancy.as_mut() {
            for (id, o) in &self.quick.overrides {
                if let Some((_, round)) = self.plan_view.get(id) {
                    occ.add_plan(round, -1.0);
                }
                occ.add_plan(&o.update.plan, 1.0);
            }
        }
        self.quick.extra_per_day = self
            .quick
            .overrides
            .values()
            .map(|o| o.update.change_per_day)
            .sum();
        if !self.quick.overrides.is_empty() {
            let times: Vec<(String, Vec<f64>, f64)> = self
                .quick
                .overrides
                .iter()
                .map(|(id, o)| {
                    (
                        id.clone(),
                        o.update.offsets_seconds.clone(),
                        o.update.period_seconds,
                    )
                })
                .collect();
            self.cluster.update_times(&times);
        }
        metrics::gauge!(m::PLAN_QUICK_EXTRA_PER_DAY).set(self.quick.extra_per_day);
    }

    /// Moves an update's fetches out of slots the other feeds already fill to the
    /// per-slot capacity ([`crate::plan::crowd::fit_one`]), and its times with them.
    fn fit_quick(&mut self, feed: &str, update: &mut Update) {
        let Some(basis) = self.quick.basis.clone() else {
            return;
        };
        let Some(cap) = basis.cfg.slot_capacity else {
            return;
        };
        let old = self.model_of(feed).map(|(_, p)| p.clone());
        let Some(occ) = self.quick.occupancy.as_mut() else {
            return;
        };
        // Around every feed but this one: its plan in force is what the update replaces.
        if let Some(old) = &old {
            occ.add_plan(old, -1.0);
        }
        let moved = crowd::fit_one(
            &mut update.plan,
            &update.model,
            quick::index_of(feed),
            &basis.cfg,
            occ,
            cap,
        );
        if let Some(old) = &old {
            occ.add_plan(old, 1.0);
        }
        if moved > 0 {
            let flat_model = flat(&update.model, basis.cfg.metric);
            let (offsets, period) = fetch_times(feed, &update.plan, flat_model, &basis.cfg);
            update.offsets_seconds = offsets;
            update.period_seconds = period;
        }
    }
}

impl<B: KvBackend> Hub<B> {
    /// Re-solves the feeds whose fetches in `found` surprised their model, off the async
    /// threads, and hands their new times to their workers.
    pub(super) async fn quick_updates(&self, found: Vec<Found>) {
        // The setting is the command line's (stored settings do not carry it): off, the
        // report path costs no message.
        if found.is_empty() || !self.cfg.planner.quick_updates {
            return;
        }
        let Some((basis, jobs)) = self.actor.ask(super::messages::Surprises(found)).await else {
            return;
        };
        let now = self.clock.now_ms();
        let solved = tokio::task::spawn_blocking(move || {
            jobs.into_iter()
                .filter_map(|j| {
                    quick::update(&basis, &j.feed, &j.model, &j.plan, &j.state, now)
                        .map(|u| (j.feed, u))
                })
                .collect::<Vec<_>>()
        })
        .await;
        match solved {
            Ok(updates) if !updates.is_empty() => {
                self.actor
                    .ask(super::messages::ApplyQuick {
                        updates,
                        now_ms: now,
                    })
                    .await;
            }
            Ok(_) => {}
            // A panic in one feed's solve: the round will plan it.
            Err(e) => {
                tracing::error!(error = %e, "re-solving surprised feeds failed; the next round plans them")
            }
        }
    }
}
