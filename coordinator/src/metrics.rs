//! Every metric of the coordinator, declared once with its description. Names follow
//! `kairos_{subsystem}_{name}` with `_total` on counters and base units in the name; label
//! values come from closed sets (never a feed URL or user id).

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

/// Declares each metric once: its name (the constant), its kind and its description,
/// which [`describe`] registers with the recorder. A metric cannot be named without being
/// described.
macro_rules! declare {
    ($($(#[doc = $doc:literal])* $kind:ident $name:ident = $metric:literal, $help:literal;)*) => {
        $($(#[doc = $doc])* pub const $name: &str = $metric;)*

        /// Describes every metric declared here.
        fn describe_declared() {
            $($kind!($name, $help);)*
        }
    };
}

declare! {
    /// Access events by outcome: `accepted`, `unknown_user`, `unknown_feed`, `out_of_window`.
    describe_counter ACCESS_EVENTS_TOTAL = "kairos_ingest_access_events_total",
        "Reader access events received, by outcome (accepted or why skipped).";
    /// Registered feeds.
    describe_gauge REGISTRY_FEEDS = "kairos_registry_feeds",
        "Feeds in the registry.";
    /// Registered users.
    describe_gauge REGISTRY_USERS = "kairos_registry_users",
        "Users in the registry.";
    /// Fetch reports accepted, by outcome class.
    describe_counter FETCHES_TOTAL = "kairos_fetches_total",
        "Fetches reported by workers, by outcome class.";
    /// Body bytes fetched (after decompression).
    describe_counter FETCH_BYTES_TOTAL = "kairos_fetch_bytes_total",
        "Body bytes fetched, after decompression.";
    /// Fetch start minus planned time.
    describe_histogram FETCH_LATENESS_SECONDS = "kairos_fetch_lateness_seconds",
        "Fetch start minus its planned time (simulated seconds).";
    /// Realized delay of postings with trusted publication dates.
    describe_histogram POSTING_DELAY_SECONDS = "kairos_posting_delay_seconds",
        "Discovery minus publication time of postings with trusted dates (simulated seconds).";
    /// Postings ingested, by `result`: `new` or `duplicate`.
    describe_counter POSTINGS_TOTAL = "kairos_postings_ingested_total",
        "Postings reported, by result: new or duplicate.";
    /// Reader accesses counted for the miss measures.
    describe_counter ACCESSES_TOTAL = "kairos_reader_accesses_total",
        "Reader accesses counted for the miss measures.";
    /// Postings a reader access missed (published, not yet discovered).
    describe_counter MISSED_POSTINGS_TOTAL = "kairos_missed_postings_total",
        "Postings published but not yet discovered at a reader's access.";
    /// Summed age of missed postings at the accesses that missed them (user-access delay).
    describe_counter ACCESS_DELAY_SECONDS_TOTAL = "kairos_access_delay_seconds_total",
        "Summed age of missed postings at the accesses that missed them.";
    /// Reports refused (feed not owned by the reporting worker, unknown feed, or removed
    /// while the report was in flight).
    describe_counter REPORTS_REJECTED_TOTAL = "kairos_reports_rejected_total",
        "Reports refused: feed not owned by the worker, not planned, or removed while the report was in flight.";
    /// Report messages refused alone for breaking the report bounds (too many postings, a field
    /// over its length); the worker logs each reason.
    describe_counter REPORTS_REFUSED_BOUNDS_TOTAL = "kairos_reports_refused_bounds_total",
        "Report messages refused alone for breaking the report bounds (too many postings, a field over its length).";
    /// Report streams ended by a message the coordinator could not read (over the decoding
    /// limit, not protobuf).
    describe_counter REPORT_STREAMS_BROKEN_TOTAL = "kairos_report_streams_broken_total",
        "Report streams ended by a message the coordinator could not read (over the decoding limit, not protobuf).";
    /// Postings whose feed-written text was changed before storing, by `what`: `title`
    /// (control characters removed, clipped) or `link` (not a safe http(s) URL: dropped).
    describe_counter POSTINGS_SANITIZED_TOTAL = "kairos_postings_sanitized_total",
        "Postings whose feed-written text was changed before storing: what=title (controls removed, clipped) or link (not a safe http(s) URL, dropped).";
    /// Item-like elements of fetched documents that the workers' parser did not read.
    describe_counter ITEMS_UNREAD_TOTAL = "kairos_items_unread_total",
        "Item-like elements of fetched documents that did not come out as items (postings that may be lost; outcome empty_unrecognized when none did).";
    /// Planned slots fetched by a second worker (around host moves and failovers).
    describe_counter FETCHES_SAME_SLOT_TOTAL = "kairos_fetches_same_slot_total",
        "Planned slots of a feed fetched by a second worker (host moves, failovers).";
    /// Fetches in flight summed over workers' last heartbeats.
    describe_gauge WORKER_FETCHES_IN_FLIGHT = "kairos_worker_sessions_fetches_in_flight",
        "Fetches in flight over all workers, from their heartbeats.";
    /// Sessions whose last applied assignment version trails the desired one.
    describe_gauge WORKERS_BEHIND = "kairos_workers_behind",
        "Worker sessions whose applied assignment trails the desired one (intent vs observed).";
    /// Gauge: the largest difference between a worker's clock and this coordinator's.
    describe_gauge WORKER_CLOCK_OFFSET = "kairos_worker_clock_offset_max_seconds",
        "The largest difference between a worker's clock and this coordinator's at their last heartbeats, seconds (fetch times are the coordinator's: a worker off by this fetches off by as much).";
    /// Unacknowledged reports summed over workers' last heartbeats.
    describe_gauge REPORT_BACKLOG = "kairos_report_backlog",
        "Unacknowledged reports over all workers.";
    /// Live worker sessions.
    describe_gauge WORKERS = "kairos_workers",
        "Live worker sessions.";
    /// Fetches the plan schedules in the next hour, over all feeds.
    describe_gauge PLAN_FETCHES_NEXT_HOUR = "kairos_plan_fetches_next_hour",
        "Fetches the plan schedules in the next hour over all feeds (back-off, skipHours and skipDays applied).";
    /// The same as a rate: the autoscaler's signal (fetches per second).
    describe_gauge PLAN_FETCH_RATE_NEXT_HOUR = "kairos_plan_fetches_per_second_next_hour",
        "Planned fetches per second over the next hour: the worker autoscaler's signal.";
    /// Fetches the plan schedules in the busiest minute of the next hour.
    describe_gauge PLAN_FETCHES_BUSIEST_MINUTE = "kairos_plan_fetches_busiest_minute_next_hour",
        "Fetches the plan schedules in the busiest minute of the next hour: a pile of feeds due at once, which the hour's rate hides.";
    /// Planned fetches the last round moved off minutes above `--max-fetches-per-minute`.
    describe_gauge PLAN_CROWD_MOVED = "kairos_plan_crowded_fetches_moved",
        "Planned fetches the last round moved off minutes above --max-fetches-per-minute to the nearby minutes that cost their feeds least (0 without the cap).";
    /// Planned fetches still above the per-minute cap after the last round's levelling.
    describe_gauge PLAN_CROWD_EXCESS = "kairos_plan_crowded_fetches_excess",
        "Planned fetches per day still above --max-fetches-per-minute after the last round levelled the plan: the budget asks more than the cap allows over the day, or no nearby minute had room.";
    /// Sum of the live workers' declared capacity, fetches per second.
    describe_gauge WORKERS_CAPACITY = "kairos_workers_capacity_fetches_per_second",
        "Sum of the live workers' declared capacity (--capacity), fetches per second.";
    /// Next hour's planned rate over the workers' declared capacity.
    describe_gauge CAPACITY_UTILIZATION = "kairos_capacity_utilization_next_hour",
        "The next hour's planned fetch rate over the workers' declared capacity (above 1: the workers cannot carry the plan; +Inf with work and no workers).";
    /// Hosts whose owner changed (joins, leaves, expired leases).
    describe_counter SHARD_MOVES_TOTAL = "kairos_shard_moves_total",
        "Hosts moved from one live worker to another.";
    /// Hosts the load bound placed past their first-ranked worker.
    describe_gauge SHARD_SPILLED_HOSTS = "kairos_shard_spilled_hosts",
        "Hosts the load bound placed past their first-ranked worker (kept there across deals while they fit, and named to the next leader).";
    /// Wall time of one relearn + plan round.
    describe_histogram PLAN_SOLVE_SECONDS = "kairos_plan_solve_seconds",
        "Wall time of a relearn + plan round.";
    /// Fetch budget per day.
    describe_gauge PLAN_BUDGET_FETCHES = "kairos_plan_budget_fetches_per_day",
        "Fetch budget per day.";
    /// Fetches per day the plan allocated.
    describe_gauge PLAN_ALLOCATED_FETCHES = "kairos_plan_allocated_fetches_per_day",
        "Fetches per day in the current plan.";
    /// Expected delay per posting under the current plan, recalibrated.
    describe_gauge PLAN_EXPECTED_DELAY_SECONDS = "kairos_plan_expected_delay_seconds",
        "Expected delay per posting under the current plan: the model's figure recalibrated by the plans' record of delivered against promised delay.";
    /// The model's own expected delay per posting, before recalibration.
    describe_gauge PLAN_MODEL_DELAY_SECONDS = "kairos_plan_model_delay_seconds",
        "Expected delay per posting under the current plan by its model alone, before recalibration.";
    /// Delivered over promised delay of the postings polls found lately (a three-day half-life).
    describe_gauge PLAN_PROMISE_RATIO = "kairos_plan_promise_ratio",
        "Delivered over promised delay of recently found postings (1 until 50 are recorded); the factor applied to the model's figure.";
    /// Feeds re-solved by the last round.
    describe_gauge PLAN_FEEDS_RESOLVED = "kairos_plan_feeds_resolved",
        "Feeds re-solved by the last planning round.";
    /// Gauge: fetches per day of the budget the plan could not place (host caps, no value).
    describe_gauge PLAN_UNSPENT_FETCHES = "kairos_plan_unspent_fetches_per_day",
        "Fetches per day of the budget the current plan leaves unplaced (hosts at their cap, or no fetch with value).";
    /// Gauge: share of the daily budget the current plan spends (below 1 when the UTC day's
    /// fetches so far, first-sight fetches included, spent the rest).
    describe_gauge PLAN_BUDGET_SHARE = "kairos_plan_budget_share",
        "Share of the daily budget the current plan spends: below 1 while the UTC day's fetches so far (first-sight fetches included) have spent the rest.";
    /// Gauge: hosts planned up to their politeness cap.
    describe_gauge PLAN_HOSTS_AT_CAP = "kairos_plan_hosts_at_cap",
        "Hosts the current plan fills to their politeness cap.";
    /// Counter: fetches whose document held only new items after an earlier fetch.
    describe_counter DOCUMENT_OVERFLOWS_TOTAL = "kairos_document_overflows_total",
        "Fetches whose document held only new items after an earlier fetch (postings may have scrolled off).";
    /// Gauge: feeds whose minimum fetch rate was raised so their document does not overflow.
    describe_gauge PLAN_CAPACITY_FLOOR_FEEDS = "kairos_plan_capacity_floor_feeds",
        "Feeds whose minimum fetch rate is raised so their document holds what they post between fetches.";
    /// Gauge: fetches per day the document floors hold beyond the configured minimums.
    describe_gauge PLAN_CAPACITY_FLOOR_FETCHES = "kairos_plan_capacity_floor_fetches_per_day",
        "Fetches per day the raised minimums of feeds whose documents would overflow hold beyond the configured minimums: budget the plan cannot move to where it would cut delay most.";
    /// Gauge: postings per day the plan expects to scroll off documents before a fetch.
    describe_gauge PLAN_EXPECTED_LOST_POSTINGS = "kairos_plan_expected_lost_postings_per_day",
        "Postings per day the plan expects to scroll off their feeds' documents before any fetch sees them, under its own rates (the count the price of --lost-posting-hours weighs against delay).";
    /// Counter: replans that failed (the previous plan stayed in force).
    describe_counter REPLAN_FAILURES_TOTAL = "kairos_replan_failures_total",
        "Replans that failed; the previous plan stays in force until one succeeds.";
    /// Postings and item markers removed by retention, by `kind`.
    describe_counter PRUNED_TOTAL = "kairos_retention_removed_total",
        "Postings (kind=posting) removed past --postings-retention, and item markers (kind=marker) past --item-marker-retention (dropped from a feed's ingest record when ingest next writes it).";
    /// Counter: panics inside the planner, contained to their round.
    describe_counter PLANNER_PANICS_TOTAL = "kairos_planner_panics_total",
        "Panics inside the planner, contained to their round (a bug: please report it with the log line).";
    /// Histogram: how long each control-plane message held the actor (every other call waits
    /// behind it).
    describe_histogram CONTROL_PLANE_MESSAGE_SECONDS = "kairos_control_plane_message_seconds",
        "How long each control-plane message held the actor; calls queue behind a long one.";
    /// Counter: control-plane messages that panicked (their caller failed; the state served on).
    describe_counter CONTROL_PLANE_PANICS_TOTAL = "kairos_control_plane_panics_total",
        "Control-plane messages that panicked: the call failed, later calls were served (a bug: please report it with the log line).";
    /// Counter: TLS handshakes that failed or timed out.
    describe_counter TLS_HANDSHAKE_FAILURES_TOTAL = "kairos_tls_handshake_failures_total",
        "TLS handshakes that failed or timed out (bad or missing client certificates among them).";
    /// Counter: certificate changes that did not load (the previous one stayed in force).
    describe_counter TLS_RELOAD_FAILURES_TOTAL = "kairos_tls_reload_failures_total",
        "Certificate file changes that did not load; the previous certificate stayed in force.";
    /// Counter: store writes that failed (a full disk, an I/O error).
    describe_counter STORE_WRITE_FAILURES_TOTAL = "kairos_store_write_failures_total",
        "Store writes that failed (full disk, I/O error); the calls answered UNAVAILABLE and nothing was acknowledged.";
    /// Gauge: 1 while the store takes writes, 0 while it is failed and being reopened.
    describe_gauge STORE_WRITABLE = "kairos_store_writable",
        "1 while the store takes writes; 0 while a failed store is being reopened (health NOT_SERVING).";
    /// Gauge: 1 on the elected leader, 0 on a standby (cluster mode).
    describe_gauge LEADER = "kairos_leader",
        "1 on the elected leader, 0 on a standby coordinator (cluster mode on etcd).";
    /// Gauge: the leader's epoch (its election revision in etcd); 0 on a standby.
    describe_gauge LEADER_EPOCH = "kairos_leader_epoch",
        "The leader's epoch: its election revision in etcd (0 on a standby).";
    /// Counter: times this process stopped acting as leader (lease not renewed in time, or a
    /// write fenced off because another leader was elected).
    describe_counter LEADER_STEPDOWNS_TOTAL = "kairos_leader_stepdowns_total",
        "Times this coordinator stopped acting as leader: its lease was not renewed in time, or another leader was elected.";
    /// Counter: tries to renew the leader's lease that went unanswered (an etcd member gone,
    /// etcd electing a raft leader, the network); the leader steps down once none was
    /// answered for two thirds of the lease's TTL.
    describe_counter LEADER_LEASE_RENEWAL_FAILURES_TOTAL = "kairos_leader_lease_renewal_failures_total",
        "Tries to renew the leader's etcd lease that went unanswered; the leader steps down once none was answered for 2/3 of the lease's TTL.";
    /// Gauge: bytes the retention window needs in the store, estimated when a leader starts
    /// (-1: postings kept for ever).
    describe_gauge STORE_WINDOW_BYTES = "kairos_store_window_bytes",
        "Bytes the retention window needs in etcd, estimated when a leader starts (-1: postings kept for ever).";
    /// Gauge: the etcd quota the window is checked against (--etcd-quota-bytes).
    describe_gauge STORE_QUOTA_BYTES = "kairos_store_quota_bytes",
        "The etcd quota the retention window is checked against (--etcd-quota-bytes).";
    /// Counter: report streams refused because they carried another leader's epoch.
    describe_counter STALE_EPOCH_REPORTS_TOTAL = "kairos_reports_stale_epoch_total",
        "Report streams refused because they carried another leader's epoch (the worker registers again and resends).";
    /// Counter: writes etcd refused because this coordinator's leadership was gone.
    describe_counter FENCED_WRITES_TOTAL = "kairos_fenced_writes_total",
        "Writes etcd refused because this coordinator's leadership was gone (another leader was elected).";
    /// Gauge: pseudo-days of the pooled pattern the models were shrunk by (chosen on held-out days).
    describe_gauge PLAN_SHRINKAGE_DAYS = "kairos_plan_shrinkage_days",
        "Pseudo-days of the pooled posting pattern the live models are shrunk by, chosen on held-out days.";
    /// Gauge: base shapes of the mixture feeds' hours are pooled in (0: one pooled shape, while
    /// too few postings back a fit or with `--shape-mixture 0`).
    describe_gauge PLAN_MIXTURE_SHAPES = "kairos_plan_shape_mixture_shapes",
        "Base shapes of the mixture feeds' hours are pooled in (0: one pooled shape, while too few postings back a fit or with `--shape-mixture 0`).";
    /// Gauge: pseudo-postings of the shapes' prior (chosen on held-out days; 0: pseudo-days).
    describe_gauge PLAN_SHAPE_PRIOR_POSTINGS = "kairos_plan_shape_prior_postings",
        "Pseudo-postings of the shapes' prior (chosen on held-out days; 0: pseudo-days).";
    /// Gauge: pseudo-postings of a feed's host's other feeds in its shape's evidence, its
    /// rate shrunk toward theirs (chosen on held-out days; 0: the host level is left out).
    describe_gauge PLAN_HOST_PRIOR_POSTINGS = "kairos_plan_host_prior_postings",
        "Pseudo-postings of a feed's host's other feeds in its shape's evidence, its rate shrunk toward theirs (chosen on held-out days; 0: the host level is left out).";
    /// Gauge: half-life of the models' observations, days (0: none; chosen on the last week).
    describe_gauge PLAN_HALF_LIFE_DAYS = "kairos_plan_half_life_days",
        "Half-life of the observations the live models learn from, days (0: every day alike), chosen on the last week's postings.";
    /// Gauge `direction`: feeds whose current regime posts at least twice (`rising`) or at
    /// most half (`falling`) their window's rate (`control/regimes.rs`).
    describe_gauge PLAN_REGIME_FEEDS = "kairos_plan_regime_feeds",
        "Feeds whose current regime posts at least twice (direction=rising) or at most half (falling) their learning window's rate: woken, bursting, slowing or stopped feeds.";
    /// Gauge: feeds the rates' forward calibration was fitted on (`control/calibrate.rs`).
    describe_gauge PLAN_CALIBRATED_FEEDS = "kairos_plan_calibrated_feeds",
        "Feeds whose forecast a week before, scored on what they posted since, calibrates every feed's rate (0: no calibration in force: too little history, or turned off).";
    /// Gauge: what feeds silent all their window posted in the week after, over their
    /// forecast (`control/calibrate.rs`).
    describe_gauge PLAN_SILENT_RATE_FACTOR = "kairos_plan_silent_rate_factor",
        "Postings of feeds silent all their window in the week after, over what their rates forecast: above 1, silent feeds start posting; below 1, silence lasts (0: no calibration in force).";
    /// Gauge: mean rate of the population's fitted distribution of rates
    /// (`control/rate_prior.rs`).
    describe_gauge PLAN_RATE_PRIOR_MEAN = "kairos_plan_rate_prior_mean",
        "Mean posting rate, postings a day, of the distribution of rates fitted to every feed's counts, under which each feed's rate is its posterior mean (0: rates shrunk by pseudo-days toward the typical feed's instead: too few feeds watched, host level on, or --no-rate-prior).";
    /// Gauge: feeds found on a timer (`control/timer.rs`).
    describe_gauge PLAN_TIMER_FEEDS = "kairos_plan_timer_feeds",
        "Feeds whose postings land within minutes of one clock time on most days they post (a nightly job, a scheduled post), planned with a peak there so their fetch comes just after it (0 with --no-timer-peaks).";
    /// Gauge: feeds whose last fetch is older than any plan allows them (`hub/overdue.rs`).
    describe_gauge PLAN_FEEDS_OVERDUE = "kairos_plan_feeds_overdue",
        "Feeds whose last fetch, at the last planning round, was older than their plan's longest gap or the floor (--min-fetches-per-day) allows, plus a day: fallen out of the schedule (0 when healthy; failing and held feeds are left out).";
    /// Gauge `day`: the plan's fetches on the busiest and the quietest of the next seven
    /// UTC days over the day's budget (`control/capacity.rs`).
    describe_gauge PLAN_DAY_BUDGET_SHARE = "kairos_plan_day_budget_share",
        "The plan's fetches on the busiest (day=busiest) and the quietest (day=quietest) of the next seven whole UTC days, over the daily budget at the round's share (kairos_plan_budget_share). Above 1 a day asks more than the workers' allowances let it start and the excess is held to later days: a weekly plan (--weekly) whose day prices have not yet evened its days (docs/OPERATIONS.md).";
    /// Gauge: fetches per day one host can take (0 when hosts are uncapped).
    describe_gauge PLAN_HOST_CAP = "kairos_plan_host_cap_fetches_per_day",
        "Fetches per day one host can take under the politeness gap (0: uncapped).";
    /// Gauge `shape`: on weekly plans, feeds by the weekly shape they learned.
    describe_gauge PLAN_WEEK_SHAPE_FEEDS = "kairos_plan_week_shape_feeds",
        "Weekly plans: feeds by learned weekly shape (daily, pooled, weekday_weekend, day_of_week).";
    /// Gauge `status`: feeds by fetch health.
    describe_gauge FEED_HEALTH = "kairos_feeds",
        "Feeds by fetch health: new, ok, failing (backing off), malformed (for a day or more), gone (410).";
    /// Counter `event`: feeds that started failing, recovered or answered 410.
    describe_counter FEED_HEALTH_EVENTS_TOTAL = "kairos_feed_health_events_total",
        "Feed health changes: failing, recovered, gone.";
    /// Counter `result`: permanent redirects followed (moved, merged, refused, error).
    describe_counter FEED_REDIRECTS_TOTAL = "kairos_feed_redirects_total",
        "Permanent redirects followed: moved (URL updated), merged (onto a registered feed), refused, error.";
    /// Gauge: hosts held or planned below their rate because they throttled us.
    describe_gauge HOSTS_THROTTLED = "kairos_hosts_throttled",
        "Hosts that answered 429/503 recently: held, and planned below their earlier rate.";
    /// Gauge: hosts held because they stopped answering (their breaker is open).
    describe_gauge HOSTS_DOWN = "kairos_hosts_down",
        "Hosts held because several of their feeds failed in a row to connect, resolve, agree on TLS or answer in time (the host's breaker is open).";
    /// Counter `event`: host breaker trips (down: first trip of an outage; again: a probe after a hold failed) and closes (up).
    describe_counter HOST_BREAKER_EVENTS_TOTAL = "kairos_host_breaker_events_total",
        "Host breakers: down (tripped), again (a probe after a hold failed; the hold doubles), up (the host answered).";
    /// Gauge: feeds held for their own 429/503 (the route, not its host).
    describe_gauge ROUTES_THROTTLED = "kairos_routes_throttled",
        "Feeds (routes) held after their own 429/503, their host's other feeds still fetched; several on one host hold the host.";
    /// Gauge: feeds whose plan a back-off or a publisher hint bounds.
    describe_gauge PLAN_BOUNDED_FEEDS = "kairos_plan_bounded_feeds",
        "Feeds whose fetch rate a back-off or a publisher hint (max-age, ttl, sy:updatePeriod) bounds.";
    /// Gauge: 1 while etcd refuses writes for lack of space (its NOSPACE alarm).
    describe_gauge STORE_OUT_OF_SPACE = "kairos_store_out_of_space",
        "1 while etcd refuses writes for lack of space (NOSPACE alarm): free space, defragment, disarm.";
    /// Gauge: 1 while a new leader serves the plan read from the store, before its first round.
    describe_gauge PLAN_FROM_STORE = "kairos_plan_from_store",
        "1 while this leader serves the plan read from the store, before its first round ends.";
    /// Gauge `phase`: seconds the term's start spent in each phase of reading the store
    /// (`registry`, `url_index`, `learned`, `plan`, `rest`, `total`).
    describe_gauge LEADER_OPEN_SECONDS = "kairos_leader_open_seconds",
        "Seconds this leader's start spent reading each part of the store before it served, by phase.";
    /// Counter `result`: writes of the plan to the store (ok, failed).
    describe_counter PLAN_SNAPSHOTS_TOTAL = "kairos_plan_snapshots_total",
        "Writes of the plan to the store (what a new leader serves at once), by result.";
    /// Gauge: bytes of the last plan written to the store.
    describe_gauge PLAN_SNAPSHOT_BYTES = "kairos_plan_snapshot_bytes",
        "Bytes of the last plan written to the store.";
    /// Counter `result`: feeds re-solved between rounds after a fetch surprised their model
    /// (raised, lowered, kept, refused, deferred).
    describe_counter PLAN_QUICK_UPDATES_TOTAL = "kairos_plan_quick_updates_total",
        "Feeds re-solved between rounds after a fetch found postings their model did not expect, by result (raised, lowered, kept; refused: the raises' budget share was spent; deferred: the next round comes before the new times would fetch).";
    /// Gauge: fetches a day the updates between rounds add to the last round's plan.
    describe_gauge PLAN_QUICK_EXTRA_PER_DAY = "kairos_plan_quick_extra_fetches_per_day",
        "Fetches a day that updates between rounds add to the last round's plan (at most 5% of the budget).";
    /// Counter `result`: requests to the WebSub callback listener (verified,
    /// verification_refused, accepted, unknown_callback, too_large, timed_out, rate_limited,
    /// and the reasons a delivery was ignored).
    describe_counter PUSH_REQUESTS_TOTAL = "kairos_push_requests_total",
        "Requests hubs made to the WebSub callback listener, by result.";
    /// Gauge `state`: WebSub subscriptions by state (requested, active, renewing, expired,
    /// denied, failed).
    describe_gauge PUSH_SUBSCRIPTIONS = "kairos_push_subscriptions",
        "WebSub subscriptions, by state.";
    /// Gauge `hub` (the hub's host): the share of its feeds' postings the hub is expected to
    /// miss, which the plan leaves to polls (1: polled in full).
    describe_gauge PUSH_HUB_MISS_SHARE = "kairos_push_hub_miss_share",
        "Share of a WebSub hub's feeds' postings it is expected to miss (what polls must find), by hub host.";
    /// Counter `by` (push, poll) and `hub`: new postings of subscribed feeds, by what saw them
    /// first (a poll counts only while the subscription delivers).
    describe_counter PUSH_FIRST_SEEN_TOTAL = "kairos_push_first_seen_total",
        "New postings of feeds subscribed at a WebSub hub, by what saw them first (push or poll) and hub host.";
    /// Histogram: a pushed posting's lag, from its publication date to the delivery.
    describe_histogram PUSH_LAG_SECONDS = "kairos_push_lag_seconds",
        "Lag of pushed postings from their publication date to the hub's delivery (simulated seconds).";
    /// Counter `result`: tasks for workers (hub_request, pushed) and why one was not sent
    /// (no_owner, no_task_stream, queue_full).
    describe_counter PUSH_TASKS_TOTAL = "kairos_push_tasks_total",
        "WebSub tasks handed to workers, and those not sent, by result.";
    /// Counter: subscriptions moved on to the next hub a feed's document names, after the
    /// one before denied or kept failing.
    describe_counter PUSH_HUB_FALLBACKS_TOTAL = "kairos_push_hub_fallbacks_total",
        "WebSub subscriptions moved on to the next hub their feed names, after the one before denied or kept failing.";
    /// Counter `answer`: hubs' answers to subscribe requests (accepted, refused).
    describe_counter PUSH_HUB_ANSWERS_TOTAL = "kairos_push_hub_answers_total",
        "Hubs' answers to subscription requests, by answer.";
    /// Gauge: bytes the process has allocated and not freed (its live heap), as its allocator
    /// counts them.
    describe_gauge ALLOCATOR_ALLOCATED_BYTES = "kairos_allocator_allocated_bytes",
        "Live heap: bytes allocated and not freed, as the allocator counts them.";
    /// Gauge: bytes of physical memory the allocator holds (live heap, its metadata, and freed
    /// pages not yet returned to the system).
    describe_gauge ALLOCATOR_RESIDENT_BYTES = "kairos_allocator_resident_bytes",
        "Physical memory the allocator holds: live heap, metadata, and freed pages not yet returned.";
}

/// Buckets of posting delay: a minute to a week (simulated seconds).
const DELAY_BUCKETS: &[f64] = &[
    60.0, 300.0, 900.0, 1_800.0, 3_600.0, 7_200.0, 14_400.0, 28_800.0, 43_200.0, 86_400.0,
    172_800.0, 604_800.0,
];
/// Buckets of push lag: a second to a day (simulated seconds).
const PUSH_LAG_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3_600.0, 14_400.0, 86_400.0,
];
/// Buckets of solve time: 10 ms to 10 min.
const SOLVE_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// The coordinator's histograms and their buckets: every latency and delay measure is a
/// histogram, so quantiles aggregate over replicas with `histogram_quantile` over
/// `sum by (le)`.
pub fn buckets() -> Vec<(&'static str, &'static [f64])> {
    [
        (POSTING_DELAY_SECONDS, DELAY_BUCKETS),
        (
            FETCH_LATENESS_SECONDS,
            kairos_runtime::telemetry::LATENESS_BUCKETS,
        ),
        (PLAN_SOLVE_SECONDS, SOLVE_BUCKETS),
        (CONTROL_PLANE_MESSAGE_SECONDS, MESSAGE_BUCKETS),
        (PUSH_LAG_SECONDS, PUSH_LAG_BUCKETS),
    ]
    .into_iter()
    .collect()
}
pub use crate::auth::{AUTH_REFUSALS_TOTAL, AUTH_RELOAD_FAILURES_TOTAL};
/// Buckets of [`CONTROL_PLANE_MESSAGE_SECONDS`]: most messages take microseconds; one over
/// 100 ms delays every Admin call and heartbeat behind it.
const MESSAGE_BUCKETS: &[f64] = &[0.0001, 0.001, 0.005, 0.02, 0.1, 0.5, 2.0];

/// Registers the descriptions with the installed recorder.
pub fn describe() {
    describe_declared();
    describe_counter!(
        AUTH_REFUSALS_TOTAL,
        "Calls refused for a missing or unknown token (unauthenticated) or a missing scope (permission_denied)."
    );
    describe_counter!(
        AUTH_RELOAD_FAILURES_TOTAL,
        "Token file changes that did not parse; the previous tokens stayed in force."
    );
    // Series that exist from the start, so dashboards and alerts ("no workers") have data
    // before the first event of their kind.
    for c in [
        FETCH_BYTES_TOTAL,
        ACCESSES_TOTAL,
        MISSED_POSTINGS_TOTAL,
        ACCESS_DELAY_SECONDS_TOTAL,
        REPORTS_REJECTED_TOTAL,
        REPORTS_REFUSED_BOUNDS_TOTAL,
        REPORT_STREAMS_BROKEN_TOTAL,
        FETCHES_SAME_SLOT_TOTAL,
        SHARD_MOVES_TOTAL,
        DOCUMENT_OVERFLOWS_TOTAL,
        REPLAN_FAILURES_TOTAL,
        PLANNER_PANICS_TOTAL,
        CONTROL_PLANE_PANICS_TOTAL,
        STORE_WRITE_FAILURES_TOTAL,
    ] {
        counter!(c).increment(0);
    }
    gauge!(STORE_WRITABLE).set(1.0);
    gauge!(STORE_OUT_OF_SPACE).set(0.0);
    gauge!(WORKERS).set(0.0);
    gauge!(SHARD_SPILLED_HOSTS).set(0.0);
    gauge!(REPORT_BACKLOG).set(0.0);
}

/// Counts a batch's access-event outcomes.
pub fn record_access(c: &crate::access::AccessCounts) {
    for (result, n) in [
        ("accepted", c.accepted),
        ("unknown_user", c.unknown_user),
        ("unknown_feed", c.unknown_feed),
        ("out_of_window", c.out_of_window),
    ] {
        if n > 0 {
            counter!(ACCESS_EVENTS_TOTAL, "result" => result).increment(n);
        }
    }
}

/// Feeds by health status (every status is set, so a class that empties reads 0).
pub fn gauge_feed_health(by_status: &std::collections::HashMap<&str, usize>) {
    for st in ["new", "ok", "failing", "malformed", "gone"] {
        gauge!(FEED_HEALTH, "status" => st).set(by_status.get(st).copied().unwrap_or(0) as f64);
    }
}

/// Hosts throttled, and routes held on hosts not held.
pub fn gauge_throttled(hosts: usize, routes: usize, down: usize) {
    gauge!(HOSTS_THROTTLED).set(hosts as f64);
    gauge!(ROUTES_THROTTLED).set(routes as f64);
    gauge!(HOSTS_DOWN).set(down as f64);
}

/// Feeds bounded by a back-off or a hint.
pub fn gauge_bounded_feeds(n: usize) {
    gauge!(PLAN_BOUNDED_FEEDS).set(n as f64);
}

/// Registry sizes.
pub fn gauge_registry(feeds: usize, users: usize) {
    gauge!(REGISTRY_FEEDS).set(feeds as f64);
    gauge!(REGISTRY_USERS).set(users as f64);
}

/// How long the term's start spent on each part of the store, by phase name.
pub fn gauge_leader_open(phases: &[(&'static str, std::time::Duration)]) {
    for (phase, took) in phases {
        gauge!(LEADER_OPEN_SECONDS, "phase" => *phase).set(took.as_secs_f64());
    }
}

/// Whether the plan in force is the one read from the store at the start of the term.
pub fn gauge_plan_from_store(yes: bool) {
    gauge!(PLAN_FROM_STORE).set(if yes { 1.0 } else { 0.0 });
}

/// A write of the plan to the store: its size, or its failure.
pub fn record_plan_snapshot(bytes: Option<usize>) {
    let result = if bytes.is_some() { "ok" } else { "failed" };
    counter!(PLAN_SNAPSHOTS_TOTAL, "result" => result).increment(1);
    if let Some(b) = bytes {
        gauge!(PLAN_SNAPSHOT_BYTES).set(b as f64);
    }
}

/// Worker count, hosts moved by a membership change, and hosts spilled past their
/// first-ranked worker.
pub fn record_membership(workers: usize, moved: u64, spilled: usize) {
    gauge!(WORKERS).set(workers as f64);
    counter!(SHARD_MOVES_TOTAL).increment(moved);
    gauge!(SHARD_SPILLED_HOSTS).set(spilled as f64);
}

/// The workers' own figures at a heartbeat ([`crate::control::cluster::SessionFigures`]):
/// reports waiting, fetches in flight, sessions whose applied assignment trails the desired
/// one, the largest clock offset.
pub fn record_worker_sessions(backlog: u64, in_flight: u64, behind: usize, clock_offset_ms: u64) {
    gauge!(REPORT_BACKLOG).set(backlog as f64);
    gauge!(WORKER_FETCHES_IN_FLIGHT).set(in_flight as f64);
    gauge!(WORKERS_BEHIND).set(behind as f64);
    gauge!(WORKER_CLOCK_OFFSET).set(clock_offset_ms as f64 / 1000.0);
}

/// One accepted fetch report; `outcome` is a closed-set label.
pub fn record_fetch(outcome: &'static str, bytes: u64, lateness_seconds: f64) {
    counter!(FETCHES_TOTAL, "outcome" => outcome).increment(1);
    counter!(FETCH_BYTES_TOTAL).increment(bytes);
    histogram!(FETCH_LATENESS_SECONDS).record(lateness_seconds);
}

/// WebSub subscriptions by state (every state set, so a state emptied reads 0).
pub fn gauge_push_subscriptions(by_state: &std::collections::HashMap<&'static str, usize>) {
    for state in [
        "requested",
        "active",
        "renewing",
        "expired",
        "denied",
        "failed",
    ] {
        gauge!(PUSH_SUBSCRIPTIONS, "state" => state)
            .set(by_state.get(state).copied().unwrap_or(0) as f64);
    }
}

/// The host of a hub URL, as a label (hubs are few; the path and query are left out).
pub fn hub_label(hub: &str) -> String {
    url::Url::parse(hub)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "unparsed".into())
}

/// A hub's miss share.
pub fn gauge_push_hub(hub: &str, miss_share: f64) {
    gauge!(PUSH_HUB_MISS_SHARE, "hub" => hub_label(hub)).set(miss_share);
}

/// A WebSub task handed to a worker, or why not.
pub fn record_push_task(result: &'static str) {
    counter!(PUSH_TASKS_TOTAL, "result" => result).increment(1);
}

/// A subscription moved on to the next hub its feed names.
pub fn record_push_fallback() {
    counter!(PUSH_HUB_FALLBACKS_TOTAL).increment(1);
}

/// A hub's answer to a subscribe request.
pub fn record_push_answer(answer: &'static str) {
    counter!(PUSH_HUB_ANSWERS_TOTAL, "answer" => answer).increment(1);
}

/// New postings of a subscribed feed first seen by `by` (push or poll) at `hub`.
pub fn record_push_first_seen(by: &'static str, hub: &str, n: usize) {
    counter!(PUSH_FIRST_SEEN_TOTAL, "by" => by, "hub" => hub_label(hub)).increment(n as u64);
}

/// Postings of an ingest batch and the misses they revealed.
pub fn record_postings(new: u64, duplicates: u64, missed: u64, missed_age_ms: f64) {
    counter!(POSTINGS_TOTAL, "result" => "new").increment(new);
    counter!(POSTINGS_TOTAL, "result" => "duplicate").increment(duplicates);
    counter!(MISSED_POSTINGS_TOTAL).increment(missed);
    counter!(ACCESS_DELAY_SECONDS_TOTAL).increment((missed_age_ms / 1000.0) as u64);
}

/// A call the auth layer refused.
pub fn record_auth_refusal(reason: &'static str) {
    counter!(AUTH_REFUSALS_TOTAL, "reason" => reason).increment(1);
}

/// A replan that failed.
pub fn record_replan_failure() {
    counter!(REPLAN_FAILURES_TOTAL).increment(1);
}

/// What a retention pass removed.
pub fn record_pruned(postings: u64, markers: u64) {
    counter!(PRUNED_TOTAL, "kind" => "posting").increment(postings);
    counter!(PRUNED_TOTAL, "kind" => "marker").increment(markers);
}

/// A panic contained inside the planner.
pub fn record_planner_panic() {
    counter!(PLANNER_PANICS_TOTAL).increment(1);
}

/// The allocator's view of the process's memory (sampled by the binary, which owns the
/// allocator).
pub fn record_allocator(allocated: u64, resident: u64) {
    gauge!(ALLOCATOR_ALLOCATED_BYTES).set(allocated as f64);
    gauge!(ALLOCATOR_RESIDENT_BYTES).set(resident as f64);
}

/// A control-plane message that panicked.
pub fn record_control_plane_panic() {
    counter!(CONTROL_PLANE_PANICS_TOTAL).increment(1);
}

/// A TLS handshake that failed or timed out.
pub fn record_tls_handshake_failure() {
    counter!(TLS_HANDSHAKE_FAILURES_TOTAL).increment(1);
}

/// A certificate change that did not load.
pub fn record_tls_reload_failure() {
    counter!(TLS_RELOAD_FAILURES_TOTAL).increment(1);
}

/// A token file change that did not parse.
pub fn record_auth_reload_failure() {
    counter!(AUTH_RELOAD_FAILURES_TOTAL).increment(1);
}

/// Counts a fetch whose document may have lost postings off its end.
pub fn record_document_overflow() {
    counter!(DOCUMENT_OVERFLOWS_TOTAL).increment(1);
}
