//! Helpers for Kairos integration tests: locating the built binaries and the shared data.
//!
//! Tests run the real binaries. They are found next to the test executable's profile
//! directory (`target/<profile>/`), so build them first — the README's test command does
//! (`cargo build --release --workspace --bins` before `cargo test --release`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod etcd;
pub mod scenario;

/// Path of a workspace binary built in the same profile as the running test.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile> directory");
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first (cargo build --release --workspace --bins)",
        path.display()
    );
    path
}

/// The repository's `../shared` folder (sample traces, feeds corpus).
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("shared")
}

/// Runs `kairos-coordinator` with `args` and returns its output.
pub fn coordinator(args: &[&str]) -> Output {
    Command::new(bin("kairos-coordinator"))
        .args(args)
        .output()
        .expect("run kairos-coordinator")
}

/// A fresh temporary directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a uniquely named directory.
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("kairos-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` to `name` inside the directory.
    pub fn write(&self, name: &str, contents: &str) {
        std::fs::write(self.0.join(name), contents).expect("write temp file");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Keep the processes' logs of a failed test.
            eprintln!("test files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A child process killed when dropped, so a failing test never leaks servers.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A started coordinator.
pub struct Coordinator {
    /// The process (killed on drop).
    pub child: Child,
    /// gRPC endpoint, `http://host:port`.
    pub url: String,
    /// Metrics endpoint, `host:port`.
    pub metrics: String,
    /// The WebSub callback listener, `host:port`, when `--push-listen` was given.
    pub push: Option<String>,
}

/// Starts binary `name` with `args` (stderr to `log`) and waits, up to 30 s, until its
/// stdout has printed a line starting with each of `wait_for`; returns the process and the
/// rest of each such line, in `wait_for` order.
pub fn spawn_until(
    name: &str,
    args: &[&str],
    log: &Path,
    wait_for: &[&str],
) -> (Child, Vec<String>) {
    let mut cmd = Command::new(bin(name));
    cmd.args(args);
    spawn_command_until(cmd, name, log, wait_for)
}

/// [`spawn_until`] for a command the caller set up (a wrapper such as `prlimit`, an
/// environment).
pub fn spawn_command_until(
    mut cmd: Command,
    name: &str,
    log: &Path,
    wait_for: &[&str],
) -> (Child, Vec<String>) {
    use std::io::BufRead;
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::fs::File::create(log).expect("log file"));
    let mut child = Child(cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}")));
    let stdout = child.0.stdout.take().expect("piped stdout");
    let prefixes: Vec<String> = wait_for.iter().map(|s| s.to_string()).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            for (i, p) in prefixes.iter().enumerate() {
                if let Some(rest) = line.strip_prefix(p.as_str()) {
                    let _ = tx.send((i, rest.to_string()));
                }
            }
        }
    });
    let mut found: Vec<Option<String>> = vec![None; wait_for.len()];
    while found.iter().any(Option::is_none) {
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok((i, rest)) => found[i] = Some(rest),
            Err(_) => panic!("{name} did not start; see {}", log.display()),
        }
    }
    (
        child,
        found.into_iter().map(Option::unwrap_or_default).collect(),
    )
}

/// Starts `kairos-coordinator serve` on free loopback ports with `args` added, waits for
/// its "listening on" and "metrics on" lines and returns the process and the addresses.
/// Its stderr goes to `log` (one log file per process).
pub fn start_coordinator(args: &[&str], log: &Path) -> Coordinator {
    let mut all = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    all.extend_from_slice(args);
    // Tests run on loopback; those that test credentials pass their own `--tokens`.
    if !args.contains(&"--tokens") {
        all.push("--insecure-loopback");
    }
    // Their feeds are served on loopback addresses; those that test the refusal pass
    // their own `--allow-private` (or `--allow-private 0.0.0.0/32`, which permits none).
    if !args.contains(&"--allow-private") {
        all.extend(["--allow-private", "127.0.0.0/8"]);
    }
    let mut wait = vec![
        "kairos-coordinator listening on ",
        "kairos-coordinator metrics on ",
    ];
    if args.contains(&"--push-listen") {
        wait.push("kairos-coordinator push on ");
    }
    let (child, found) = spawn_until("kairos-coordinator", &all, log, &wait);
    Coordinator {
        child,
        url: format!("http://{}", found[0]),
        metrics: found[1].clone(),
        push: found.get(2).cloned(),
    }
}

/// The value of the first sample of `metric` (name plus labels, exactly as exported) in a
/// Prometheus text scrape.
pub fn sample(scrape: &str, metric: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(metric)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Wall-clock Unix ms now.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `GET /metrics` from `addr` (plain HTTP/1.0 over loopback).
pub fn scrape(addr: &str) -> String {
    try_scrape(addr).unwrap_or_else(|| panic!("scrape {addr} failed"))
}

/// [`scrape`], or `None` when nothing answers within a few seconds (a paused or
/// restarting process).
pub fn try_scrape(addr: &str) -> Option<String> {
    http_get(addr, "/metrics")
}

/// The whole HTTP/1.0 answer (status line, headers, body) to `GET path` at `addr`, or
/// `None` when nothing answers within a few seconds.
pub fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    use std::net::ToSocketAddrs;
    let addr = addr.to_socket_addrs().ok()?.next()?;
    let timeout = std::time::Duration::from_secs(3);
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The status code of `GET path` at `addr` (the metrics listener's `/livez`, `/readyz`).
pub fn http_status(addr: &str, path: &str) -> Option<u16> {
    http_get(addr, path)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
