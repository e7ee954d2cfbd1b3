//! Which network addresses a feed URL may reach (server-side request forgery guard).
//!
//! Feed URLs come from users and OPML files, so a URL — or a redirect, or a DNS answer —
//! pointing at the crawler's own network (loopback, private ranges, link-local cloud
//! metadata endpoints, …) is refused unless an explicit allow-list names it. The check is
//! applied to IP-literal URLs before connecting, to every redirect hop, and to every DNS
//! answer through [`GuardedResolver`], so the address checked is the address connected to.

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Address policy: public addresses always; others only inside `allow`.
#[derive(Clone, Debug, Default)]
pub struct TargetPolicy {
    allow: Vec<IpNet>,
}

/// A refused target; found in the error chain of a refused fetch.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("target {0} is not a public address and is not in the allow-list")]
pub struct ForbiddenTarget(pub String);

impl TargetPolicy {
    /// A policy that additionally permits the given networks (e.g. `127.0.0.0/8` in tests).
    pub fn allowing(allow: Vec<IpNet>) -> Self {
        TargetPolicy { allow }
    }

    /// Whether `ip` may be contacted.
    pub fn permits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow.iter().any(|n| n.contains(&ip))
    }
}

pub use kairos_runtime::address::is_public;

/// DNS resolution that drops refused addresses; a name left with none fails with
/// [`ForbiddenTarget`].
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    policy: Arc<TargetPolicy>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<TargetPolicy>) -> Self {
        GuardedResolver { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let looked_up = tokio::net::lookup_host((host.as_str(), 0)).await;
            metrics::histogram!(
                crate::telemetry::DNS_SECONDS,
                "result" => if looked_up.is_ok() { "ok" } else { "error" }
            )
            .record(started.elapsed().as_secs_f64());
            let found: Vec<SocketAddr> = looked_up?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.permits(a.ip()))
                .collect();
            if allowed.is_empty() && !found.is_empty() {
                let err: Box<dyn std::error::Error + Send + Sync> =
                    Box::new(ForbiddenTarget(format!("{host} ({})", found[0].ip())));
                return Err(err);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_ranges_are_refused_and_public_ones_allowed() {
        let p = TargetPolicy::default();
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::",
            "2001:db8::1",
            // IPv6 forms that embed a loopback, private or metadata IPv4 address.
            "::7f00:1",
            "::ffff:0:7f00:1",
            "::ffff:0:a9fe:a9fe",
            "::a00:1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:c0a8:101::",
            "2001:0:4136:e378::1",
            "64:ff9b:1::808:808",
            "100::1",
        ] {
            assert!(!p.permits(bad.parse().unwrap()), "{bad} must be refused");
        }
        for good in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "::ffff:0:808:808",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(p.permits(good.parse().unwrap()), "{good} is public");
        }
        let p = TargetPolicy::allowing(vec!["127.0.0.0/8".parse().unwrap()]);
        assert!(p.permits("127.0.0.2".parse().unwrap()));
        assert!(!p.permits("10.0.0.1".parse().unwrap()));
    }
}
