//! Reading a fetched body — parse, document hints, feed discovery — off the async runtime,
//! on a bounded set of blocking threads, under a wall-time budget per document.
//!
//! Parsing is CPU work on input a stranger wrote. Run on the runtime's threads, two slow
//! documents at once stopped a worker's heartbeats for seconds and cost it its lease. Here
//! each document is read on tokio's blocking pool, at most [`Reader::new`]'s `threads` at a
//! time (a permit is held until the read really ends), and the fetch waits at most `budget`
//! for it: a read past its budget is reported as malformed while its thread finishes in the
//! background, still holding its permit, so runaway documents can never occupy more than
//! `threads` cores. The repair passes are linear (see `normalise`), so the budget is a
//! backstop, not the bound.

use crate::{discover, hints, parse};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Wall time one document's reading may take by default. The 10 MiB bound documents of
/// `worker/tests/bounds.rs` read in about a second on one core.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

/// What a document said, for the fetch's report.
#[derive(Debug, Default)]
pub struct Read {
    /// Items in document order.
    pub items: Vec<parse::Item>,
    /// Item-like elements that did not come out as items.
    pub unread: usize,
    /// Item-like elements were there but no item was read.
    pub unrecognised: Option<String>,
    /// RSS `<ttl>`, minutes.
    pub ttl_minutes: Option<u32>,
    /// Update-period and skip hints.
    pub hints: hints::DocHints,
    /// Title, site URL and format as written.
    pub meta: Option<(Option<String>, Option<String>, String)>,
    /// The WebSub hubs and self the document names in its header (the answer's `Link`
    /// headers, which come first, are the fetcher's: see [`crate::websub::discover`]).
    pub push: crate::websub::PushLinks,
    /// A web page's announced feed, when the body was a page and not a feed.
    pub discovered: Option<String>,
    /// Why the body is malformed, if it is.
    pub malformed: Option<String>,
}

/// Reads documents on at most `threads` blocking threads, `budget` each.
#[derive(Clone, Debug)]
pub struct Reader {
    permits: Arc<Semaphore>,
    budget: Duration,
}

impl Reader {
    /// A reader using at most `threads` (at least 1) threads, waiting `budget` per document.
    pub fn new(threads: usize, budget: Duration) -> Reader {
        Reader {
            permits: Arc::new(Semaphore::new(threads.max(1))),
            budget,
        }
    }

    /// The threads a worker gives to parsing by default: all cores but one, at least one,
    /// so the runtime's own threads keep a core for heartbeats and reports.
    pub fn default_threads() -> usize {
        std::thread::available_parallelism()
            .map(|n| n.get().saturating_sub(1))
            .unwrap_or(1)
            .max(1)
    }

    /// Reads `body`, fetched from `requested` and answered by `final_url`.
    pub async fn read(
        &self,
        feed: &str,
        body: Vec<u8>,
        requested: String,
        final_url: String,
    ) -> Read {
        let Ok(permit) = self.permits.clone().acquire_owned().await else {
            return Read {
                malformed: Some("the worker is stopping".into()),
                ..Read::default()
            };
        };
        let task = tokio::task::spawn_blocking(move || {
            let out = read_now(&body, &requested, &final_url);
            drop(permit);
            out
        });
        match tokio::time::timeout(self.budget, task).await {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => Read {
                malformed: Some(format!("the parser failed: {e}")),
                ..Read::default()
            },
            Err(_) => {
                metrics::counter!(crate::telemetry::DOCUMENTS_OVER_BUDGET_TOTAL).increment(1);
                tracing::warn!(feed, budget = ?self.budget, "a document took longer than its parse budget; reported malformed");
                Read {
                    malformed: Some(format!(
                        "reading the document took longer than its budget of {:?}",
                        self.budget
                    )),
                    ..Read::default()
                }
            }
        }
    }
}

/// The synchronous read (what runs on the blocking thread).
pub fn read_now(body: &[u8], requested: &str, final_url: &str) -> Read {
    let mut out = Read::default();
    match parse::parse(body) {
        Ok(doc) => {
            out.ttl_minutes = doc.ttl_minutes;
            out.unread = doc.items_unread();
            if doc.items.is_empty() && out.unread > 0 {
                out.unrecognised = Some(format!(
                    "{} item-like elements but no item read (as {:?})",
                    out.unread, doc.format
                ));
            }
            out.meta = Some((
                doc.title.clone(),
                doc.site_url.clone(),
                doc.format_seen.clone(),
            ));
            out.items = doc.items;
            out.hints = hints::scan(body);
            out.push = crate::websub::from_document(body, url::Url::parse(final_url).ok().as_ref());
        }
        Err(e) => {
            // A web page where a feed was expected: follow the feed it announces.
            match discover::announced_feed(body, final_url)
                .filter(|f| f != requested && f != final_url)
            {
                Some(feed_url) => out.discovered = Some(feed_url),
                None => {
                    out.malformed = Some(if discover::looks_like_html(body) {
                        format!("a web page announcing no feed ({e})")
                    } else {
                        e.to_string()
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_document_past_its_budget_is_malformed_and_the_runtime_stays_free() {
        // A budget no real parse meets: the read is reported malformed, the caller is not
        // held, and the runtime's timers keep running meanwhile.
        let reader = Reader::new(1, Duration::from_nanos(1));
        let body = "<rss version=\"2.0\"><channel>".to_string()
            + &"<item><title>t</title><guid>g</guid></item>".repeat(20_000)
            + "</channel></rss>";
        let r = reader
            .read(
                "f",
                body.into_bytes(),
                "http://a/".into(),
                "http://a/".into(),
            )
            .await;
        assert!(r.malformed.unwrap().contains("budget"));
        let ok = Reader::new(1, Duration::from_secs(30))
            .read(
                "f",
                b"<rss version=\"2.0\"><channel><item><guid>x</guid></item></channel></rss>"
                    .to_vec(),
                "http://a/".into(),
                "http://a/".into(),
            )
            .await;
        assert!(ok.malformed.is_none());
        assert_eq!(ok.items.len(), 1);
    }
}
