//! The worker's metrics, declared once with their descriptions (the endpoint is
//! [`kairos_runtime::telemetry::serve_metrics`]). Names follow the coordinator's
//! conventions (`kairos_worker_{name}`, `_total` on counters, base units); labels come from
//! closed sets. Latencies are histograms with buckets, so quantiles can be aggregated over
//! every worker with `histogram_quantile(q, sum by (le) (rate(..._bucket[5m])))`.

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

/// Fetches by outcome (`ok`, `not_modified`, `server_error`, … as in the reports).
pub const FETCHES_TOTAL: &str = "kairos_worker_fetches_total";
/// Wall time of one fetch (connect, TLS, request, body), seconds.
pub const FETCH_DURATION_SECONDS: &str = "kairos_worker_fetch_duration_seconds";
/// Start of a fetch minus its planned time on the system clock, seconds.
pub const FETCH_LATENESS_SECONDS: &str = "kairos_worker_fetch_lateness_seconds";
/// Response body bytes received (after decompression).
pub const FETCH_BYTES_TOTAL: &str = "kairos_worker_fetch_bytes_total";
/// Fetches running now.
pub const FETCHES_IN_FLIGHT: &str = "kairos_worker_fetches_in_flight";
/// Fetches due whose start waits for a free slot under `--max-in-flight`.
pub const FETCHES_DUE_WAITING: &str = "kairos_worker_fetches_due_waiting";
/// Feeds this worker owns and schedules.
pub const FEEDS: &str = "kairos_worker_feeds";
/// Reports not yet acknowledged by the coordinator.
pub const REPORT_BACKLOG: &str = "kairos_worker_report_backlog";
/// Documents with item-like elements the parser did not read, by `read` = `none` (the
/// fetch is reported EMPTY_UNRECOGNIZED) or `partly`.
pub const DOCUMENTS_UNREAD_TOTAL: &str = "kairos_worker_documents_unread_total";
/// Documents whose reading (parse, hints, discovery) took longer than the parse budget;
/// each such fetch is reported malformed.
pub const DOCUMENTS_OVER_BUDGET_TOTAL: &str = "kairos_worker_documents_over_budget_total";
/// What a fetch's report lost to the report bounds, by `what`: `clipped` (postings whose
/// title was cut or link dropped), `withheld` (new items past the per-fetch limit, left for
/// a later fetch), `parts` (extra messages a split report took).
pub const REPORT_BOUNDS_TOTAL: &str = "kairos_worker_report_bounds_total";
/// Report messages the coordinator refused, each logged with its reason.
pub const REPORTS_REFUSED_TOTAL: &str = "kairos_worker_reports_refused_total";
/// WebSub tasks from the coordinator, by `task` (`hub_request`, `pushed`) and `result`
/// (`accepted`, `refused` for hub requests; `reported`, `nothing_new`, `unreadable`,
/// `not_owned` for pushed documents).
pub const PUSH_TASKS_TOTAL: &str = "kairos_worker_push_tasks_total";
/// DNS resolution time of feed hosts, by `result`.
pub const DNS_SECONDS: &str = "kairos_worker_dns_seconds";
/// Time to open a connection to a feed host (DNS, TCP and, for https, the TLS handshake),
/// by `result`; connections reused from the pool are not counted.
pub const CONNECT_SECONDS: &str = "kairos_worker_connect_seconds";
/// Version of the last assignment applied (restarts at 1 with each session).
pub const ASSIGNMENT_VERSION: &str = "kairos_worker_assignment_version";
/// Fetches held to the next UTC day because the day's allowance was spent.
pub const FETCHES_HELD_TOTAL: &str = "kairos_worker_fetches_held_total";
/// The day's allowance: the most fetches this worker may start today (-1: none given).
pub const DAY_ALLOWANCE: &str = "kairos_worker_day_allowance";
/// Fetches started today (UTC) against the allowance.
pub const DAY_FETCHES: &str = "kairos_worker_day_fetches";
/// Fetches besides the plan held to a later minute by the worker's share of the per-minute
/// cap.
pub const FETCHES_DEFERRED_TOTAL: &str = "kairos_worker_fetches_deferred_total";
/// The worker's share of the cluster's per-minute cap (-1: no cap).
pub const MINUTE_SHARE: &str = "kairos_worker_minute_share";

/// Buckets of fetch durations: 5 ms to 60 s.
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets of DNS and connection times: 0.5 ms to 10 s (loopback to a slow far host).
const CONNECT_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Describes every worker metric and sets the gauges to zero, so each appears in the first
/// scrape.
pub fn describe() {
    describe_counter!(FETCHES_TOTAL, "Fetches by outcome.");
    describe_counter!(
        PUSH_TASKS_TOTAL,
        "WebSub tasks from the coordinator (hub requests, pushed documents), by task and result."
    );
    describe_histogram!(
        FETCH_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Wall time of one fetch."
    );
    describe_histogram!(
        FETCH_LATENESS_SECONDS,
        metrics::Unit::Seconds,
        "Start of a fetch minus its planned time, on the system clock."
    );
    describe_counter!(FETCH_BYTES_TOTAL, "Response body bytes received.");
    describe_histogram!(
        DNS_SECONDS,
        metrics::Unit::Seconds,
        "DNS resolution time of feed hosts, by result."
    );
    describe_histogram!(
        CONNECT_SECONDS,
        metrics::Unit::Seconds,
        "Time to open a connection to a feed host (DNS, TCP and the TLS handshake for https), by result; pooled connections are not counted."
    );
    describe_counter!(
        DOCUMENTS_UNREAD_TOTAL,
        "Documents holding item-like elements the parser did not read: read=none (no item at all) or read=partly."
    );
    describe_counter!(
        DOCUMENTS_OVER_BUDGET_TOTAL,
        "Documents whose reading took longer than the parse budget (reported malformed)."
    );
    describe_counter!(
        REPORT_BOUNDS_TOTAL,
        "What reports lost to their bounds: what=clipped (postings cut), withheld (items left for a later fetch), parts (extra messages of split reports)."
    );
    describe_counter!(
        REPORTS_REFUSED_TOTAL,
        "Report messages the coordinator refused (each logged with its reason)."
    );
    describe_gauge!(FETCHES_IN_FLIGHT, "Fetches running now.");
    describe_gauge!(
        FETCHES_DUE_WAITING,
        "Fetches due and waiting for a slot under --max-in-flight."
    );
    describe_gauge!(FEEDS, "Feeds this worker owns.");
    describe_gauge!(REPORT_BACKLOG, "Reports not yet acknowledged.");
    describe_gauge!(
        ASSIGNMENT_VERSION,
        "Version of the last assignment applied."
    );
    describe_counter!(
        FETCHES_HELD_TOTAL,
        "Fetches held to the next UTC day because the coordinator's daily allowance was spent."
    );
    describe_gauge!(
        DAY_ALLOWANCE,
        "The most fetches this worker may start today (UTC), as the coordinator dealt it; -1 when none was given."
    );
    describe_gauge!(DAY_FETCHES, "Fetches started today (UTC).");
    describe_counter!(
        FETCHES_DEFERRED_TOTAL,
        "Fetches besides the plan (catch-ups, held fetches, first sights, sweep extras) held to a later minute by this worker's share of the per-minute cap; one held twice counts twice."
    );
    describe_gauge!(
        MINUTE_SHARE,
        "The most fetches this worker may start in a minute, its share of --max-fetches-per-minute as the coordinator dealt it; -1 when there is no cap."
    );
    for g in [
        FETCHES_IN_FLIGHT,
        FETCHES_DUE_WAITING,
        FEEDS,
        REPORT_BACKLOG,
        ASSIGNMENT_VERSION,
        DAY_FETCHES,
    ] {
        gauge!(g).set(0.0);
    }
    gauge!(DAY_ALLOWANCE).set(-1.0);
    gauge!(MINUTE_SHARE).set(-1.0);
    counter!(FETCHES_DEFERRED_TOTAL).absolute(0);
    counter!(FETCH_BYTES_TOTAL).absolute(0);
    counter!(FETCHES_HELD_TOTAL).absolute(0);
    for read in ["none", "partly"] {
        counter!(DOCUMENTS_UNREAD_TOTAL, "read" => read).absolute(0);
    }
}

/// Records one finished fetch.
pub fn record_fetch(outcome: i32, duration_s: f64, lateness_s: f64, bytes: u64) {
    counter!(FETCHES_TOTAL, "outcome" => kairos_proto::outcome_label(outcome)).increment(1);
    histogram!(FETCH_DURATION_SECONDS).record(duration_s);
    histogram!(FETCH_LATENESS_SECONDS).record(lateness_s.max(0.0));
    counter!(FETCH_BYTES_TOTAL).increment(bytes);
}

/// The worker's histogram buckets, for [`kairos_runtime::telemetry::serve_metrics`].
pub fn buckets() -> Vec<(&'static str, &'static [f64])> {
    vec![
        (FETCH_DURATION_SECONDS, DURATION_BUCKETS),
        (DNS_SECONDS, CONNECT_BUCKETS),
        (CONNECT_SECONDS, CONNECT_BUCKETS),
        (
            FETCH_LATENESS_SECONDS,
            kairos_runtime::telemetry::LATENESS_BUCKETS,
        ),
    ]
}
