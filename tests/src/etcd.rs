//! Private etcd servers for tests: members on free loopback ports, each with its own data
//! directory, killed on drop. Debian's `etcd-server` provides the binary (`.ci/run` installs
//! it); without it a test fails under CI and is skipped with a message elsewhere.

use crate::Child;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A running etcd cluster.
pub struct EtcdCluster {
    /// Client endpoints (`127.0.0.1:port`), one per member.
    pub endpoints: Vec<String>,
    members: Vec<Member>,
}

/// Certificate files (PEM) a TLS etcd serves with and requires of clients.
#[derive(Clone, Debug)]
pub struct EtcdTlsFiles {
    /// CA that signs the server's and the clients' certificates.
    pub ca: PathBuf,
    /// The server's certificate (SANs 127.0.0.1 and localhost) and key.
    pub cert: PathBuf,
    /// Key of `cert`.
    pub key: PathBuf,
}

struct Member {
    name: String,
    tls: Option<EtcdTlsFiles>,
    client: SocketAddr,
    peer: SocketAddr,
    dir: PathBuf,
    /// `--quota-backend-bytes`, when not etcd's default.
    quota: Option<u64>,
    /// Addresses it also serves clients on (same port), beside loopback.
    also_on: Vec<String>,
    child: Option<Child>,
}

/// A loopback port that is free now, for etcd and the other servers the tests start. It is
/// drawn below the kernel's ephemeral range (32768 and up on Linux): a port from that range
/// (what binding port 0 gives) can be taken as the source port of some outgoing connection
/// between this check and the server's bind, and the server then exits with "address
/// already in use". Below it only another listener can collide, which
/// [`EtcdCluster::start`] survives by drawing again.
pub fn free_port() -> SocketAddr {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    for _ in 0..1000 {
        let n = DRAWS.fetch_add(1, Ordering::Relaxed);
        // SplitMix64 of (seed, draw): spread, and different in parallel test processes.
        let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let port = 20_000 + (z % 12_000) as u16;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if TcpListener::bind(addr).is_ok() {
            return addr;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// The etcd binary, or `None` (after failing under CI) when it is not installed.
pub fn etcd_binary() -> Option<PathBuf> {
    for p in ["/usr/bin/etcd", "/usr/local/bin/etcd"] {
        if Path::new(p).exists() {
            return Some(PathBuf::from(p));
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "etcd is not installed (Debian package etcd-server); .ci/run installs it"
    );
    eprintln!("skipped: etcd is not installed (apt-get install etcd-server)");
    None
}

impl EtcdCluster {
    /// Starts `n` members under `dir` and waits until every client port answers.
    pub fn start(dir: &Path, n: usize) -> Option<EtcdCluster> {
        Self::start_with(dir, n, None)
    }

    /// One member serving clients over TLS only, requiring client certificates signed by
    /// the same CA.
    pub fn start_tls(dir: &Path, tls: EtcdTlsFiles) -> Option<EtcdCluster> {
        Self::start_with(dir, 1, Some(tls))
    }

    /// One member with a backend quota of `bytes` (etcd's default is 2 GiB), for state
    /// measured at scale.
    pub fn start_with_quota(dir: &Path, bytes: u64) -> Option<EtcdCluster> {
        Self::start_with_opts(dir, 1, None, Some(bytes), &[])
    }

    /// `n` members that also serve clients on each of `ips` (addresses of interfaces the
    /// caller created, such as the root end of a veth pair into a network namespace).
    pub fn start_also_on(dir: &Path, n: usize, ips: &[String]) -> Option<EtcdCluster> {
        Self::start_with_opts(dir, n, None, None, ips)
    }

    /// The client endpoints at `ip` (one of those given to [`EtcdCluster::start_also_on`]).
    pub fn endpoints_at(&self, ip: &str) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("{ip}:{}", m.client.port()))
            .collect()
    }

    /// Whether member `i` runs (not killed).
    pub fn is_up(&self, i: usize) -> bool {
        self.members[i].child.is_some()
    }

    fn start_with(dir: &Path, n: usize, tls: Option<EtcdTlsFiles>) -> Option<EtcdCluster> {
        Self::start_with_opts(dir, n, tls, None, &[])
    }

    fn start_with_opts(
        dir: &Path,
        n: usize,
        tls: Option<EtcdTlsFiles>,
        quota: Option<u64>,
        also_on: &[String],
    ) -> Option<EtcdCluster> {
        let bin = etcd_binary()?;
        // A member that exits before its port answers lost a race for a port (see
        // `free_port`): start the whole cluster again on fresh ports, a few times.
        let mut last = String::new();
        for _attempt in 0..4 {
            let mut members: Vec<Member> = (0..n)
                .map(|i| Member {
                    name: format!("m{i}"),
                    tls: tls.clone(),
                    client: free_port(),
                    peer: free_port(),
                    dir: dir.join(format!("etcd-m{i}")),
                    quota,
                    also_on: also_on.to_vec(),
                    child: None,
                })
                .collect();
            let initial = members
                .iter()
                .map(|m| format!("{}=http://{}", m.name, m.peer))
                .collect::<Vec<_>>()
                .join(",");
            for m in &mut members {
                let _ = std::fs::remove_dir_all(&m.dir);
                m.child = Some(spawn(&bin, m, &initial, "new"));
            }
            let mut cluster = EtcdCluster {
                endpoints: members.iter().map(|m| m.client.to_string()).collect(),
                members,
            };
            let started = cluster.members.iter_mut().try_for_each(wait_member);
            match started {
                Ok(()) => return Some(cluster),
                Err(e) => {
                    eprintln!("etcd did not start, trying fresh ports: {e}");
                    last = e;
                }
            }
        }
        panic!("etcd did not start in 4 tries: {last}");
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        self.members[i].child = None;
    }

    /// Restarts member `i` on its data directory.
    pub fn restart(&mut self, i: usize) {
        let bin = etcd_binary().expect("etcd was there at start");
        let initial = self
            .members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let m = &mut self.members[i];
        m.child = Some(spawn(&bin, m, &initial, "existing"));
        if let Err(e) = wait_member(m) {
            panic!("etcd member {i} did not restart: {e}");
        }
    }
}

fn spawn(bin: &Path, m: &Member, initial: &str, state: &str) -> Child {
    std::fs::create_dir_all(&m.dir).expect("etcd data dir");
    let log = std::fs::File::create(m.dir.with_extension("log")).expect("etcd log");
    let scheme = if m.tls.is_some() { "https" } else { "http" };
    let mut cmd = Command::new(bin);
    if let Some(t) = &m.tls {
        cmd.arg("--cert-file")
            .arg(&t.cert)
            .arg("--key-file")
            .arg(&t.key)
            .arg("--trusted-ca-file")
            .arg(&t.ca)
            .arg("--client-cert-auth");
    }
    if let Some(q) = m.quota {
        cmd.args(["--quota-backend-bytes", &q.to_string()]);
    }
    let child = cmd
        .args(["--name", &m.name])
        .arg("--data-dir")
        .arg(m.dir.join("data"))
        .args([
            "--listen-client-urls",
            &std::iter::once(m.client.to_string())
                .chain(
                    m.also_on
                        .iter()
                        .map(|ip| format!("{ip}:{}", m.client.port())),
                )
                .map(|a| format!("{scheme}://{a}"))
                .collect::<Vec<_>>()
                .join(","),
        ])
        .args([
            "--advertise-client-urls",
            &format!("{scheme}://{}", m.client),
        ])
        .args(["--listen-peer-urls", &format!("http://{}", m.peer)])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://{}", m.peer),
        ])
        .args(["--initial-cluster", initial])
        .args(["--initial-cluster-state", state])
        .args(["--initial-cluster-token", "kairos-test"])
        // Tests elect fast; the defaults (100 ms heartbeat, 1 s election) are fine on
        // loopback but a loaded 2-core CI machine needs some slack.
        .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start etcd");
    Child(child)
}

/// Waits up to 30 s for member `m`'s client port to answer; an error (naming its log) when
/// it exits first or does not answer in time.
fn wait_member(m: &mut Member) -> Result<(), String> {
    let start = Instant::now();
    let log = m.dir.with_extension("log");
    loop {
        // Exit first: a member that lost its bind has usually exited by the time it is seen.
        let exited = m.child.as_mut().and_then(|c| c.0.try_wait().ok().flatten());
        if let Some(status) = exited {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(3).collect();
            return Err(format!(
                "etcd on {} exited ({status}); see {}: {}",
                m.client,
                log.display(),
                tail.join(" | ")
            ));
        }
        if TcpStream::connect_timeout(&m.client, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "etcd on {} did not answer in 30 s; see {}",
                m.client,
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
