//! The leader's WebSub side besides the subscriptions' state ([`crate::control::push`]):
//! the callback listener hubs call ([`listener`]) and the signature check of pushed content
//! ([`signature`]). Design and what is built: docs/WEBSUB.md.

pub mod listener;
pub mod signature;

/// Counts a request to the callback listener by its result (a closed set of labels).
fn record(result: &'static str) {
    metrics::counter!(crate::metrics::PUSH_REQUESTS_TOTAL, "result" => result).increment(1);
}
