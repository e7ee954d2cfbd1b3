//! Every metric of the coordinator, declared once with its description. Names follow
//! `kairos_{subsystem}_{name}` with `_total` on counters; label values come from closed
//! sets (never a feed URL or user id).

use metrics::{describe_counter, describe_gauge};

/// Access events by outcome: `accepted`, `unknown_user`, `unknown_feed`, `out_of_window`.
pub const ACCESS_EVENTS_TOTAL: &str = "kairos_ingest_access_events_total";
/// Registered feeds.
pub const REGISTRY_FEEDS: &str = "kairos_registry_feeds";
/// Registered users.
pub const REGISTRY_USERS: &str = "kairos_registry_users";

/// Registers the descriptions with the installed recorder.
pub fn describe() {
    describe_counter!(
        ACCESS_EVENTS_TOTAL,
        "Reader access events received, by outcome (accepted or why skipped)."
    );
    describe_gauge!(REGISTRY_FEEDS, "Feeds in the registry.");
    describe_gauge!(REGISTRY_USERS, "Users in the registry.");
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
            metrics::counter!(ACCESS_EVENTS_TOTAL, "result" => result).increment(n);
        }
    }
}
