//! Network namespaces for the cluster soak: each coordinator replica in a namespace of its
//! own, reached from the root namespace (etcd, workers, the bench) through a second
//! namespace that routes for it, so one replica can be cut off from everything while every
//! process keeps running. Only addresses of the interfaces made here are used.

use std::process::Command;

/// Runs `ip` with `args`; panics with what it said if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {}: {e} (iproute2 is needed)", args.join(" ")));
    assert!(
        out.status.success(),
        "ip {}: {} (the bench needs root to make its network namespaces)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// The namespaces: replica `i` lives in `{tag}c{i}` at 10.213.i.2 and reaches the root
/// namespace (etcd, workers, the bench) at 10.214.i.1 through its router `{tag}r{i}`.
pub struct Net {
    tag: String,
    replicas: usize,
}

impl Net {
    pub fn create(replicas: usize) -> Net {
        let tag = format!("ks{}", std::process::id() % 100_000);
        let net = Net { tag, replicas };
        for i in 0..replicas {
            let (c, r) = (net.ns(i), net.router(i));
            let (ca, cb) = (format!("{}a{i}", net.tag), format!("{}b{i}", net.tag));
            let (ra, rb) = (format!("{}x{i}", net.tag), format!("{}y{i}", net.tag));
            ip(&["netns", "add", &c]);
            ip(&["netns", "add", &r]);
            ip(&["link", "add", &ca, "type", "veth", "peer", "name", &cb]);
            ip(&["link", "set", &ca, "netns", &c]);
            ip(&["link", "set", &cb, "netns", &r]);
            ip(&["link", "add", &ra, "type", "veth", "peer", "name", &rb]);
            ip(&["link", "set", &ra, "netns", &r]);
            let at = |ns: &str, args: &[&str]| {
                let mut all = vec!["netns", "exec", ns, "ip"];
                all.extend_from_slice(args);
                ip(&all);
            };
            at(
                &c,
                &["addr", "add", &format!("10.213.{i}.2/24"), "dev", &ca],
            );
            at(&c, &["link", "set", &ca, "up"]);
            at(&c, &["link", "set", "lo", "up"]);
            at(
                &c,
                &["route", "add", "default", "via", &format!("10.213.{i}.1")],
            );
            at(
                &r,
                &["addr", "add", &format!("10.213.{i}.1/24"), "dev", &cb],
            );
            at(
                &r,
                &["addr", "add", &format!("10.214.{i}.2/24"), "dev", &ra],
            );
            at(&r, &["link", "set", &cb, "up"]);
            at(&r, &["link", "set", &ra, "up"]);
            let sysctl = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &r,
                    "sysctl",
                    "-qw",
                    "net.ipv4.ip_forward=1",
                ])
                .status()
                .expect("sysctl");
            assert!(sysctl.success(), "forwarding in {r}");
            ip(&["addr", "add", &format!("10.214.{i}.1/24"), "dev", &rb]);
            ip(&["link", "set", &rb, "up"]);
            ip(&[
                "route",
                "add",
                &format!("10.213.{i}.0/24"),
                "via",
                &format!("10.214.{i}.2"),
            ]);
        }
        net
    }

    pub fn ns(&self, i: usize) -> String {
        format!("{}c{i}", self.tag)
    }

    fn router(&self, i: usize) -> String {
        format!("{}r{i}", self.tag)
    }

    /// Where replica `i` serves.
    pub fn replica_ip(i: usize) -> String {
        format!("10.213.{i}.2")
    }

    /// Where replica `i` reaches the root namespace.
    pub fn root_ip(i: usize) -> String {
        format!("10.214.{i}.1")
    }

    /// Drops every packet to or from replica `i`, silently (blackhole routes in its
    /// router: no ICMP, so both sides see a partition, not a refusal).
    pub fn cut(&self, i: usize) {
        for dst in [Self::replica_ip(i), Self::root_ip(i)] {
            let r = self.router(i);
            ip(&["netns", "exec", &r, "ip", "route", "add", "blackhole", &dst]);
        }
    }

    pub fn heal(&self, i: usize) {
        for dst in [Self::replica_ip(i), Self::root_ip(i)] {
            let r = self.router(i);
            ip(&["netns", "exec", &r, "ip", "route", "del", "blackhole", &dst]);
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its ends of the veth pairs, and so the pairs.
        for i in 0..self.replicas {
            for ns in [self.ns(i), self.router(i)] {
                let _ = Command::new("ip").args(["netns", "del", &ns]).status();
            }
        }
    }
}
