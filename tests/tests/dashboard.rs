//! `deploy/`: the Grafana dashboard's queries and the Prometheus rules, against a running
//! system. A `standalone --demo` run is scraped by a real Prometheus (Debian's package, on
//! loopback, one-second scrapes) loaded with `deploy/base/prometheus/kairos-rules.yaml`; every
//! panel query and every recording rule must return data, and `promtool` must accept the
//! rules. Without Prometheus installed the test is skipped, except under CI (`CI` set), where
//! a missing Prometheus is a failure: `.ci/run` installs it.

use kairos_tests::{spawn_until, TempDir};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs an instant query; returns the number of series in the result (None on error).
fn query(port: u16, q: &str) -> Option<usize> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /api/v1/query?query={} HTTP/1.0\r\nHost: x\r\n\r\n",
        encode(q)
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let body = out.split_once("\r\n\r\n")?.1;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    (v["status"] == "success").then(|| v["data"]["result"].as_array().map_or(0, Vec::len))
}

#[test]
fn every_dashboard_query_and_rule_returns_data_from_a_running_system() {
    let Some(prometheus) = on_path("prometheus") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "prometheus is not installed; .ci/run installs Debian's package"
        );
        eprintln!("skipped: prometheus is not installed (apt-get install prometheus)");
        return;
    };
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/base/grafana/kairos-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let mut exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("a target expression").to_string())
        .collect();
    assert!(exprs.len() >= 15, "{} queries", exprs.len());
    let rules_path = repo().join("deploy/base/prometheus/kairos-rules.yaml");
    let rules = std::fs::read_to_string(&rules_path).unwrap();
    exprs.extend(
        rules
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- record: "))
            .map(String::from),
    );
    if let Some(promtool) = on_path("promtool") {
        let out = Command::new(&promtool)
            .args(["check", "rules"])
            .arg(&rules_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Every alert has unit tests (a case where it fires), and they pass.
        let tests_path = repo().join("deploy/base/prometheus/kairos-rules.test.yaml");
        let tests = std::fs::read_to_string(&tests_path).unwrap();
        for alert in rules
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- alert: "))
        {
            let fires = tests
                .split("alertname: ")
                .skip(1)
                .any(|case| case.starts_with(alert) && case.contains("exp_alerts:"));
            assert!(fires, "alert {alert} has no promtool test where it fires");
        }
        let out = Command::new(promtool)
            .args(["test", "rules"])
            .arg(&tests_path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let dir = TempDir::new("dashboard");
    let (_demo, found) = spawn_until(
        "kairos-coordinator",
        &[
            "standalone",
            "--demo",
            "--demo-feeds",
            "60",
            "--demo-hosts",
            "4",
            "--demo-users",
            "40",
            "--run-for",
            "120s",
            "--metrics-addr",
            "127.0.0.1:0",
            "--replan-interval",
            "2s",
            // Push's panels need a hub.
            "--demo-hub-share",
            "0.3",
        ],
        &dir.path().join("standalone.log"),
        &["kairos-coordinator metrics on "],
    );
    // Below the ephemeral range, so no outgoing connection takes it before Prometheus binds.
    let port = kairos_tests::etcd::free_port().port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: kairos\n    static_configs:\n      - targets: ['{}']\n",
            rules_path.display(),
            found[0]
        ),
    )
    .unwrap();
    let _prom = kairos_tests::Child(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus"),
    );
    let started = Instant::now();
    loop {
        let empty: Vec<&String> = exprs
            .iter()
            .filter(|q| query(port, q).unwrap_or(0) == 0)
            .collect();
        if empty.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no data after 90 s for:\n{}\n(logs in {})",
            empty
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            dir.path().display()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}
