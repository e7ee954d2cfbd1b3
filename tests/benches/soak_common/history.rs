//! The checker of histories inside the cluster soak (issue 24's item 4): a client keeps
//! adding and removing feeds and subscribing readers through whichever replica answers,
//! while the soak's faults come; after each fault has settled, with no call in flight,
//! what the leader shows is checked against every answer the client was given
//! (`tests/common/history.rs` holds the client and the check, shared with
//! `tests/history.rs`). The budget is left alone: the soak's figures depend on it.

#[path = "../../tests/common/history.rs"]
mod checker;

use checker::{check, shown, Client, Outcome};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Readers the client subscribes, each to some of the soak's first feeds.
const USERS: usize = 20;
/// The soak's feeds the readers may subscribe to (`f0` …).
const TARGETS: usize = 10;

/// The client, its calls running on a task, and the budget the replicas started with.
pub struct History {
    client: Arc<Mutex<Client>>,
    initial_budget: f64,
    token: String,
    calls: tokio::task::JoinHandle<()>,
    /// Violations found by every check so far.
    pub violations: usize,
}

impl History {
    /// Adds the readers through `leader_url`, then starts calling every `urls` in turn
    /// (one call at a time, five a second). Its feeds get `feed_url` (`{id}` is the id).
    pub async fn start(
        urls: Vec<String>,
        leader_url: &str,
        token: &str,
        feed_url: &str,
    ) -> History {
        checker::add_readers(leader_url, Some(token), USERS).await;
        let initial_budget = shown(leader_url, Some(token), "h", USERS).await.budget;
        let pairs = (0..USERS)
            .flat_map(|u| (0..TARGETS).map(move |f| (format!("u{u}"), format!("f{f}"))))
            .collect();
        let mut c = Client::new(urls, pairs, 7);
        c.token = Some(token.to_string());
        c.budget_calls = false;
        c.feed_url = feed_url.to_string();
        let client = Arc::new(Mutex::new(c));
        let calls = tokio::spawn({
            let client = client.clone();
            async move {
                loop {
                    client.lock().await.step().await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
        History {
            client,
            initial_budget,
            token: token.to_string(),
            calls,
            violations: 0,
        }
    }

    /// Checks what the leader at `url` shows against the history, with no call in flight;
    /// says what it found after `label`.
    pub async fn check(&mut self, url: &str, label: &str) {
        let c = self.client.lock().await;
        let s = shown(url, Some(&self.token), "h", USERS).await;
        let bad = check(&c.history, &s, self.initial_budget);
        let count = |f: fn(&Outcome) -> bool| c.history.iter().filter(|e| f(&e.outcome)).count();
        println!(
            "  history after {label}: {} calls ({} acknowledged, {} refused, {} unknown), {} feeds and {} subscriptions shown, {} violations",
            c.history.len(),
            count(|o| *o == Outcome::Acked),
            count(|o| matches!(o, Outcome::Refused(_))),
            count(|o| matches!(o, Outcome::Unknown(_))),
            s.feeds.len(),
            s.subscriptions.len(),
            bad.len()
        );
        for b in bad.iter().take(10) {
            println!("    {b}");
        }
        self.violations += bad.len();
    }

    /// Calls made so far.
    pub async fn calls(&self) -> usize {
        self.client.lock().await.history.len()
    }

    /// Stops the client.
    pub fn stop(&self) {
        self.calls.abort();
    }
}
