//! The control-plane actor: one task owns the live state of a leader's term — the worker
//! sessions, every feed's learned state, the replanner, the reader access statistics, the
//! host throttles and limits, and the running totals — and everything else reaches it by
//! message through [`Actor`], a cloneable handle.
//!
//! Every request is a named message with its reply type ([`Message`]; all of them are in
//! [`super::messages`]), run on the owning task with exclusive access to [`State`]; its
//! reply goes back on a oneshot channel. Jobs are synchronous and short: nothing in a job
//! awaits, reads the store or solves. Store I/O happens in the caller, before (to gather
//! what a job needs) or after (to make a job's result durable), and the solve runs on the
//! blocking pool with the replanner moved out of the state; its result comes back as a job.
//! So no call waits on a lock held across a solve or a write, and the state has exactly one
//! writer, which is what lets a term of leadership start and end cleanly: the state lives
//! and dies with the task.

use crate::access::AccessStats;
use crate::control::cluster::Cluster;
use crate::control::feedstate::FeedState;
use crate::control::hosts::HostThrottles;
use crate::control::relearn::{PlannerSettings, Replanner};
use crate::metrics as m;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

use super::health::FeedBounds;
use super::{PlanView, Totals};

/// Jobs queued at most before callers wait their turn to send (back-pressure instead of
/// unbounded memory when a burst of reports meets a slow moment).
const QUEUE: usize = 4096;

/// A message that holds the actor longer than this is logged with where it came from.
const SLOW: std::time::Duration = std::time::Duration::from_millis(100);

/// The replanner between rounds, with the generation of the settings it was given. A round
/// moves it out of the state for the solve and its result job puts it back.
pub(super) struct Parked {
    pub generation: u64,
    pub replanner: Replanner,
}

/// Everything the actor owns.
pub(super) struct State {
    /// Worker sessions, leases and the feeds' assignment to them.
    pub cluster: Cluster,
    /// Every feed's learned state, shared with the rounds that read a snapshot of it (a
    /// snapshot clones pointers, not postings, so taking it stalls no other message).
    pub feeds: HashMap<String, Arc<FeedState>>,
    /// Subscribers per feed at the last round, for the missed-postings measure.
    pub subscribers: HashMap<String, Vec<String>>,
    /// Each user's latest accesses, for the missed-postings measure.
    pub recent_access: HashMap<String, VecDeque<i64>>,
    /// Reader access statistics (persisted each minute).
    pub access: AccessStats,
    /// The planner settings in force and their generation (bumped by every update).
    pub settings: (u64, PlannerSettings),
    /// The replanner, absent while a round solves.
    pub replanner: Option<Parked>,
    /// Every feed's model and plan from the last round, for inspection.
    pub plan_view: PlanView,
    /// Hosts that throttled us.
    pub throttles: HostThrottles,
    /// Operators' per-host limits, fetches per day.
    pub host_limits: HashMap<String, f64>,
    /// What bounded the last plan.
    pub bounds: FeedBounds,
    /// Running totals.
    pub totals: Totals,
    /// The plans' promised delay against what polls delivered ([`crate::control::promise`]).
    pub promises: crate::control::promise::PromiseRecord,
    /// When each feed never fetched yet is due for its first fetch ([`super::pacing`]).
    pub first_sights: HashMap<String, i64>,
    /// Feeds removed lately, with when ([`super::removal`]): reports of theirs still in
    /// flight are dropped rather than written back.
    pub removed: HashMap<String, i64>,
    /// The latest UTC day that held first sights ([`super::pacing::Pacing::paced_day`]).
    pub paced_day: super::pacing::Steering,
    /// Fetches a day the last plan was made for: what the workers' allowances deal.
    pub budget_per_day: Option<f64>,
    /// Feeds re-solved since the last round ([`super::quick`]).
    pub quick: super::quick::Quick,
    /// What the log said last of plans' days against the day's budget.
    pub days_over: super::figures::DaysOver,
    /// WebSub subscriptions, hubs' reliability and the workers' task streams.
    pub push: super::push::PushState,
}

impl State {
    /// Deals the day's budget over the sessions as they stand ([`super::allowances`]):
    /// after a plan installed the slow way and after workers join or leave.
    pub fn deal_allowances(&mut self, now_ms: i64) {
        let Some(per_day) = self.budget_per_day else {
            return; // No plan yet: nothing to deal.
        };
        let counted = self.totals.worker_counts_today(now_ms);
        let budget = super::allowances::DayBudget {
            now_ms,
            per_day,
            today: self.totals.ledger.today(now_ms),
            counted: &counted,
            first_sights: &self.first_sights,
            per_minute: self.settings.1.max_fetches_per_minute,
        };
        self.cluster.deal(&|w| super::allowances::deal(&budget, w));
    }
}

/// A request the control plane serves: handled on its task with the [`State`] to itself,
/// answered with `Reply`. Handlers are synchronous and short (see the module's notes).
pub(super) trait Message: Send + 'static {
    /// What the sender gets back.
    type Reply: Send + 'static;
    /// Runs the request on the state.
    fn handle(self, state: &mut State) -> Self::Reply;
}

/// A queued message: its handler, boxed, and its name for the slow-message log.
struct Job {
    run: Box<dyn FnOnce(&mut State) + Send>,
    from: &'static str,
}

/// The handle: sends jobs to the task that owns [`State`].
#[derive(Clone)]
pub(super) struct Actor {
    tx: mpsc::Sender<Job>,
}

impl Actor {
    /// Starts the owning task; it ends when the last handle is dropped.
    pub fn spawn(state: State) -> Self {
        let (tx, mut rx) = mpsc::channel::<Job>(QUEUE);
        tokio::spawn(async move {
            let mut state = state;
            while let Some(job) = rx.recv().await {
                let started = std::time::Instant::now();
                let Job { run, from } = job;
                // A bug in one job must not take the whole control plane down with it:
                // the job's caller sees the failure, later messages are served.
                let ran =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut state)));
                let took = started.elapsed();
                metrics::histogram!(m::CONTROL_PLANE_MESSAGE_SECONDS).record(took.as_secs_f64());
                if took > SLOW {
                    // Every call queued behind it waited as long: worth a line each time.
                    tracing::warn!(
                        took_ms = took.as_millis() as u64,
                        message = from,
                        "a control-plane message held the actor long"
                    );
                }
                if let Err(panic) = ran {
                    m::record_control_plane_panic();
                    tracing::error!(
                        panic = %panic_text(&panic),
                        "a control-plane message panicked; its caller gets an error, the state serves on"
                    );
                }
            }
        });
        Actor { tx }
    }

    /// Sends `m` and waits for its reply.
    ///
    /// # Panics
    /// If the handler panics (caught and logged on the owning task), the panic is raised
    /// again in the caller, as a poisoned lock would have; the state stays usable for other
    /// callers.
    pub async fn ask<M: Message>(&self, m: M) -> M::Reply {
        self.call(name_of::<M>(), move |s| m.handle(s)).await
    }

    /// Queues `m` without waiting for it to run (for results coming back from the blocking
    /// pool, which must not block on a full queue).
    pub fn tell<M: Message<Reply = ()>>(&self, m: M) {
        self.post(name_of::<M>(), move |s| m.handle(s));
    }

    /// Runs `f` on the state, from a test (requests in the code are [`Message`]s).
    #[cfg(test)]
    pub async fn run_for_test<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State) -> T + Send + 'static,
    ) -> T {
        self.call("a test's look inside", f).await
    }

    async fn call<T: Send + 'static, F: FnOnce(&mut State) -> T + Send + 'static>(
        &self,
        from: &'static str,
        f: F,
    ) -> T {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            run: Box::new(move |s| {
                let _ = reply.send(f(s));
            }),
            from,
        };
        if self.tx.send(job).await.is_err() {
            // The task ends only when every handle is gone, and `self` is one.
            unreachable!("the control-plane task outlives its handles");
        }
        match answer.await {
            Ok(v) => v,
            Err(_) => panic!("a control-plane message panicked (logged by the control plane)"),
        }
    }

    fn post<F: FnOnce(&mut State) + Send + 'static>(&self, from: &'static str, f: F) {
        let tx = self.tx.clone();
        let job = Job {
            run: Box::new(f),
            from,
        };
        match tx.try_send(job) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(job)) => {
                tokio::spawn(async move {
                    let _ = tx.send(job).await;
                });
            }
            // The term ended: nothing is left to update.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// A message's name for the log: its type's, without the module path.
fn name_of<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    full.rsplit("::").next().unwrap_or(full)
}

/// The text of a caught panic.
pub(super) fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::cluster::ClusterConfig;

    fn state() -> State {
        State {
            cluster: Cluster::new(ClusterConfig::default(), 1),
            feeds: HashMap::new(),
            subscribers: HashMap::new(),
            recent_access: HashMap::new(),
            access: AccessStats::new(24, crate::time::DAY_MS),
            settings: (0, PlannerSettings::default()),
            replanner: None,
            plan_view: Arc::default(),
            throttles: Default::default(),
            host_limits: HashMap::new(),
            bounds: Default::default(),
            totals: Totals::default(),
            promises: Default::default(),
            first_sights: HashMap::new(),
            removed: HashMap::new(),
            paced_day: Default::default(),
            budget_per_day: None,
            quick: Default::default(),
            days_over: Default::default(),
            push: Default::default(),
        }
    }

    struct CountFetch;
    impl Message for CountFetch {
        type Reply = ();
        fn handle(self, s: &mut State) {
            s.totals.fetches += 1;
        }
    }

    struct Counts;
    impl Message for Counts {
        type Reply = (u64, u64);
        fn handle(self, s: &mut State) -> (u64, u64) {
            (s.totals.fetches, s.totals.plans)
        }
    }

    struct Buggy;
    impl Message for Buggy {
        type Reply = ();
        fn handle(self, s: &mut State) {
            s.totals.plans = 7;
            panic!("a bug in one message")
        }
    }

    #[tokio::test]
    async fn messages_run_in_order_and_a_panicking_one_leaves_the_state_serving() {
        let a = Actor::spawn(state());
        for _ in 0..100 {
            a.clone().tell(CountFetch);
        }
        assert_eq!(a.ask(Counts).await.0, 100);
        let b = a.clone();
        let failed = tokio::spawn(async move { b.ask(Buggy).await }).await;
        assert!(failed.is_err(), "the caller of the panicking message fails");
        assert_eq!(
            a.ask(Counts).await,
            (100, 7),
            "later messages are served on the same state"
        );
    }

    #[test]
    fn a_message_is_logged_by_its_own_name() {
        assert_eq!(name_of::<Buggy>(), "Buggy");
        assert_eq!(name_of::<super::super::messages::Heartbeat>(), "Heartbeat");
    }
}
