//! A full disk under `serve --data-dir`, on a real filesystem that fills up (a small tmpfs
//! the test mounts): writes answer UNAVAILABLE and are not acknowledged, health turns
//! NOT_SERVING, and when space returns the store reopens and serves again without a
//! restart — with everything acknowledged before, during and after still there, also after
//! a restart.

mod common;

use common::{add, feed_ids, health, wait_health};
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{http_status, sample, scrape, start_coordinator, TempDir};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

const ADMIN: &str = "kairos.v1.Admin";
const POLL: Duration = Duration::from_millis(200);

/// A tmpfs mounted for the test, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` at `dir`; `None` where this process may not mount.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!("mount: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Writes `path` until the filesystem is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5a_u8; 64 << 10];
    loop {
        match f.write_all(&chunk).and_then(|_| f.sync_all()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => return, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_turns_health_not_serving_and_the_store_recovers_when_space_returns() {
    let dir = TempDir::new("disk-full");
    let Some(mnt) = Tmpfs::mount(&dir.path().join("mnt"), "48m") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "this test mounts a tmpfs (root or CAP_SYS_ADMIN); under CI it must run"
        );
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    };
    let data = mnt.0.join("data");
    let c = start_coordinator(
        &["--data-dir", data.to_str().unwrap()],
        &dir.path().join("coordinator-1.log"),
    );
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let id = format!("before{i}");
        admin.add_feed(add(&id)).await.unwrap();
        acknowledged.push(id);
    }
    wait_health(
        &c.url,
        ADMIN,
        ServingStatus::Serving,
        Duration::from_secs(5),
        POLL,
    )
    .await;

    // Fill the disk; writes go on succeeding only while redb has free pages in its file.
    let ballast = mnt.0.join("ballast");
    fill(&ballast);
    let mut refused = None;
    for i in 0..5_000 {
        let id = format!("full{i}");
        match admin.add_feed(add(&id)).await {
            Ok(_) => acknowledged.push(id),
            Err(s) => {
                refused = Some((id, s));
                break;
            }
        }
    }
    let (refused_id, status) = refused.expect("a write failed on the full disk");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    wait_health(
        &c.url,
        ADMIN,
        ServingStatus::NotServing,
        Duration::from_secs(10),
        POLL,
    )
    .await;
    let m = scrape(&c.metrics);
    assert_eq!(sample(&m, "kairos_store_writable"), Some(0.0), "{m}");
    // The plain HTTP probes say the same: alive, not ready.
    assert_eq!(http_status(&c.metrics, "/readyz"), Some(503));
    assert_eq!(http_status(&c.metrics, "/livez"), Some(200));
    assert!(sample(&m, "kairos_store_write_failures_total").unwrap_or(0.0) >= 1.0);
    // Still full: a retry is refused the same way, and health stays down.
    let again = admin.add_feed(add("still-full")).await.unwrap_err();
    assert_eq!(again.code(), Code::Unavailable, "{again:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        health(&c.url, ADMIN).await,
        ServingStatus::NotServing as i32,
        "health came back while the disk was still full"
    );

    // Space returns: the store reopens by itself.
    std::fs::remove_file(&ballast).unwrap();
    wait_health(
        &c.url,
        ADMIN,
        ServingStatus::Serving,
        Duration::from_secs(15),
        POLL,
    )
    .await;
    assert_eq!(
        sample(&scrape(&c.metrics), "kairos_store_writable"),
        Some(1.0)
    );
    assert_eq!(http_status(&c.metrics, "/readyz"), Some(200));
    admin.add_feed(add(&refused_id)).await.unwrap();
    acknowledged.push(refused_id);
    admin.add_feed(add("after")).await.unwrap();
    acknowledged.push("after".into());
    acknowledged.sort();
    assert_eq!(feed_ids(&mut admin, 500).await, acknowledged);

    // And it all is on disk.
    drop(admin);
    drop(c);
    let c = start_coordinator(
        &["--data-dir", data.to_str().unwrap()],
        &dir.path().join("coordinator-2.log"),
    );
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    assert_eq!(feed_ids(&mut admin, 500).await, acknowledged);
}
