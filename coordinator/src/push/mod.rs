//! The leader's WebSub side besides the subscriptions' state ([`crate::control::push`]):
//! checking the signature of pushed content ([`signature`]). Design and what is built:
//! docs/WEBSUB.md.

pub mod signature;
