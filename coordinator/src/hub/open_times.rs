//! What a term's start spent reading the store, by part (`kairos_leader_open_seconds`).

/// Where a term's start spent its time reading the store, before it could serve: what a
/// failover costs beyond the lease, by part.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenTimes {
    /// Users and feeds of the registry.
    pub registry: std::time::Duration,
    /// The URL index checked (and entered for feeds registered before it).
    pub url_index: std::time::Duration,
    /// Every feed's learned state, read and decoded.
    pub learned: std::time::Duration,
    /// The stored plan, read and decoded.
    pub plan: std::time::Duration,
    /// Everything else: settings, access statistics, host limits, the term's members.
    pub rest: std::time::Duration,
    /// The whole start.
    pub total: std::time::Duration,
}

impl OpenTimes {
    /// Each phase by the name the `kairos_leader_open_seconds` gauge gives it.
    pub fn phases(&self) -> [(&'static str, std::time::Duration); 6] {
        [
            ("registry", self.registry),
            ("url_index", self.url_index),
            ("learned", self.learned),
            ("plan", self.plan),
            ("rest", self.rest),
            ("total", self.total),
        ]
    }
}
