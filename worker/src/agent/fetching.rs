//! One fetch of one feed, start to report: the request with the feed's validators, the
//! document read into new postings (only items this worker has not seen), and the report
//! queued within the protocol's bounds, waiting for room in the buffer rather than dropping
//! it. Deliveries a hub pushed (`super::tasks`) are reported the same way.

use super::{clamp_retry_after, FeedInfo, Shared};
use crate::fetch::{Fetcher, Outcome};
use crate::telemetry;
use kairos_proto::bounds;
use kairos_proto::v1 as pb;
use pb::report_message::Body;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn outcome_code(o: &Outcome) -> (pb::FetchOutcome, u32, String) {
    use pb::FetchOutcome as F;
    match o {
        Outcome::Ok { status, .. } => (F::Ok, *status as u32, String::new()),
        Outcome::NotModified => (F::NotModified, 304, String::new()),
        Outcome::Throttled { status, .. } => (F::Throttled, *status as u32, String::new()),
        Outcome::ClientError { status } => (F::ClientError, *status as u32, String::new()),
        Outcome::ServerError { status } => (F::ServerError, *status as u32, String::new()),
        Outcome::Timeout => (F::Timeout, 0, "timed out".into()),
        Outcome::TooLarge => (F::TooLarge, 0, "body over the size limit".into()),
        Outcome::RedirectLimit => (F::RedirectLimit, 0, "redirect limit or loop".into()),
        Outcome::ForbiddenTarget(m) => (F::ForbiddenTarget, 0, m.clone()),
        Outcome::BadUrl(m) => (F::NetworkError, 0, format!("bad URL: {m}")),
        Outcome::Network(m) => (F::NetworkError, 0, m.clone()),
    }
}

/// Fetches one feed and queues its report (waiting for buffer space if needed).
/// `admitted_ms` is when the schedule handed it out and the day's allowance counted it: the
/// report's start, so that the coordinator counts the fetch on the day the worker did (read
/// when the task got to run, a fetch handed out just before midnight was counted by the
/// worker on one day and by the coordinator on the next, which then spent its budget and
/// one fetch more).
pub(super) async fn fetch_one(
    shared: &Shared,
    fetcher: &Fetcher,
    feed: &str,
    planned_ms: i64,
    admitted_ms: i64,
) {
    let now = shared.clock.now_ms();
    let started = admitted_ms;
    let (url, validators) = {
        let mut st = shared.state.lock().expect("worker state");
        let fetch = match st.feeds.get(feed) {
            // Revoked meanwhile, or postponed by the server's Retry-After.
            None => None,
            Some(f) if f.not_before_ms > now || f.held_until_ms > now => {
                shared.stats.deferred.fetch_add(1, Ordering::Relaxed);
                None
            }
            Some(f) if kairos_runtime::schedule::skipped(f.skip_hours, f.skip_days, now) => {
                shared.stats.deferred.fetch_add(1, Ordering::Relaxed);
                None
            }
            Some(f) => Some((f.url.clone(), f.validators.clone())),
        };
        let Some(fetch) = fetch else {
            st.schedule.release(admitted_ms);
            return;
        };
        fetch
    };
    let wall = std::time::Instant::now();
    let mut fetched = fetcher.fetch(&url, &validators).await;
    let finished = shared.clock.now_ms();
    let (mut outcome, status, mut error) = outcome_code(&fetched.outcome);
    let mut doc = crate::document::Read::default();
    if let Outcome::Ok { body, .. } = &mut fetched.outcome {
        let body = std::mem::take(body);
        doc = shared
            .reader
            .read(feed, body, url.clone(), fetched.final_url.clone())
            .await;
        if let Some(why) = doc.unrecognised.take() {
            // Not a quiet feed: items are there in a form the parser does not read.
            outcome = pb::FetchOutcome::EmptyUnrecognized;
            error = why;
            metrics::counter!(telemetry::DOCUMENTS_UNREAD_TOTAL, "read" => "none").increment(1);
        } else if doc.unread > 0 {
            metrics::counter!(telemetry::DOCUMENTS_UNREAD_TOTAL, "read" => "partly").increment(1);
        }
        if let Some(feed_url) = &doc.discovered {
            tracing::info!(feed, page = %fetched.final_url, %feed_url, "a web page, not a feed: following the feed it announces");
        }
        if let Some(why) = doc.malformed.take() {
            outcome = pb::FetchOutcome::Malformed;
            error = why;
        }
    }
    let crate::document::Read {
        items,
        unread,
        ttl_minutes: ttl,
        hints,
        meta,
        discovered,
        push,
        ..
    } = doc;
    // WebSub: the answer's Link headers first, the document's links when they name no hub
    // (W3C WebSub §4); only on a document that parsed.
    let push = if meta.is_some() {
        let base = url::Url::parse(&fetched.final_url).ok();
        let headed = crate::websub::from_link_headers(
            fetched.link_headers.iter().map(String::as_str),
            base.as_ref(),
        );
        if headed.is_empty() {
            push
        } else {
            headed
        }
    } else {
        crate::websub::PushLinks::default()
    };
    let retry_after = match &fetched.outcome {
        Outcome::Throttled { retry_after, .. } => retry_after.map(|d| {
            let (secs, clamped) = clamp_retry_after(d);
            if clamped {
                shared
                    .stats
                    .retry_after_clamped
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(feed, asked = d.as_secs(), "Retry-After clamped to a day");
            }
            secs
        }),
        _ => None,
    };
    let max_age = fetched
        .max_age
        .map(|d| d.as_secs().min(u32::MAX as u64) as u32);
    let mut report = pb::FetchReport {
        feed_id: feed.to_string(),
        outcome: outcome as i32,
        http_status: status,
        scheduled_unix_ms: planned_ms,
        started_unix_ms: started,
        finished_unix_ms: finished,
        body_bytes: fetched.body_bytes,
        new_postings: Vec::new(),
        etag: String::new(),
        last_modified: String::new(),
        // A discovered feed is reported as a permanent move: the coordinator's move handling
        // updates the registered URL, or merges into a feed already registered there.
        redirected_to: if let Some(found) = &discovered {
            found.clone()
        } else if fetched.final_url != url {
            fetched.final_url.clone()
        } else {
            String::new()
        },
        retry_after_seconds: retry_after.unwrap_or(0),
        min_interval_seconds: max_age.unwrap_or(0),
        error,
        items_in_document: items.len().min(u32::MAX as usize) as u32,
        ttl_seconds: ttl.map(|m| m.saturating_mul(60)).unwrap_or(0),
        update_period_seconds: hints.update_period_seconds,
        skip_hours_mask: hints.skip_hours,
        skip_days_mask: hints.skip_days,
        redirect_permanent: fetched.permanent_redirect || discovered.is_some(),
        items_unread: unread.min(u32::MAX as usize) as u32,
        // Clipped to the report bounds when the report is split.
        feed_title: meta.as_ref().and_then(|m| m.0.clone()).unwrap_or_default(),
        site_url: meta.as_ref().and_then(|m| m.1.clone()).unwrap_or_default(),
        format: meta.map(|m| m.2).unwrap_or_default(),
        continuation: false,
        postings_withheld: 0,
        websub_hubs: push.hubs,
        websub_topic: push.topic.unwrap_or_default(),
    };
    telemetry::record_fetch(
        report.outcome,
        wall.elapsed().as_secs_f64(),
        // On the system clock: simulated lateness over the clock's scale (1 in production).
        (now - planned_ms) as f64 / 1000.0 / shared.clock.scale(),
        report.body_bytes,
    );
    let (withheld, clipped) = {
        let mut st = shared.state.lock().expect("worker state");
        let Some(info) = st.feeds.get_mut(feed) else {
            return; // Revoked while fetching: the new owner reports it.
        };
        info.fetched = true;
        if let Some(secs) = retry_after {
            info.not_before_ms = finished + secs as i64 * 1000;
        }
        if status == 410 {
            // Gone: not fetched again here until the coordinator has dropped it from the plan
            // at its next replan (a resumed feed comes back as a new assignment). The hold
            // ends after a day in case the feed was resumed before that replan.
            info.not_before_ms = info.not_before_ms.max(finished + 86_400_000);
        }
        if outcome == pb::FetchOutcome::Ok {
            info.validators = fetched.validators.clone();
        }
        report.etag = info.validators.etag.clone().unwrap_or_default();
        report.last_modified = info.validators.last_modified.clone().unwrap_or_default();
        take_new(info, items, finished, &mut report)
    };
    shared.stats.fetches.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        feed,
        outcome = ?outcome,
        planned_ms,
        started,
        new = report.new_postings.len(),
        error = %report.error,
        "fetched"
    );
    send_report(shared, report, withheld, clipped).await;
}

/// Moves the items `info` has not seen into `report` as new postings discovered at
/// `finished` (at most [`bounds::MAX_POSTINGS_PER_FETCH`]; the rest are left unseen for a
/// later fetch); returns (withheld, clipped).
pub(super) fn take_new(
    info: &mut FeedInfo,
    items: Vec<crate::parse::Item>,
    finished: i64,
    report: &mut pb::FetchReport,
) -> (u64, u64) {
    let (mut withheld, mut clipped) = (0u64, 0u64);
    for it in items {
        if info.seen.contains(&it.id_hash) {
            continue;
        }
        if report.new_postings.len() == bounds::MAX_POSTINGS_PER_FETCH {
            // Left unseen, so a later fetch reports it.
            withheld += 1;
            continue;
        }
        info.remember(it.id_hash);
        let mut p = pb::Posting {
            item_id_hash: it.id_hash,
            link: it.link.unwrap_or_default(),
            title: it.title.unwrap_or_default(),
            published_unix_ms: it.published_unix_ms,
            discovered_unix_ms: finished,
        };
        if bounds::clip_posting(&mut p) {
            clipped += 1;
        }
        report.new_postings.push(p);
    }
    (withheld, clipped)
}

/// Queues a fetch's (or a delivery's) report, split within the bounds, and counts what the
/// bounds withheld or clipped.
pub(super) async fn send_report(
    shared: &Shared,
    mut report: pb::FetchReport,
    withheld: u64,
    clipped: u64,
) {
    let feed = report.feed_id.clone();
    report.postings_withheld = withheld.min(u32::MAX as u64) as u32;
    if withheld > 0 {
        metrics::counter!(telemetry::REPORT_BOUNDS_TOTAL, "what" => "withheld").increment(withheld);
        tracing::warn!(
            feed,
            withheld,
            limit = bounds::MAX_POSTINGS_PER_FETCH,
            "more new items than one fetch reports; the rest wait for a later fetch"
        );
    }
    if clipped > 0 {
        metrics::counter!(telemetry::REPORT_BOUNDS_TOTAL, "what" => "clipped").increment(clipped);
    }
    let parts = bounds::split_fetch(report);
    if parts.len() > 1 {
        metrics::counter!(telemetry::REPORT_BOUNDS_TOTAL, "what" => "parts")
            .increment(parts.len() as u64 - 1);
    }
    for part in parts {
        push_report(shared, Body::Fetch(part)).await;
    }
}

/// Queues a report, waiting while the buffer is full (back-pressure, never a drop).
pub(super) async fn push_report(shared: &Shared, body: Body) {
    loop {
        let space = shared.space.notified();
        let pushed = shared
            .state
            .lock()
            .expect("worker state")
            .reports
            .push(body.clone());
        if pushed.is_ok() {
            break;
        }
        // Wait for an acknowledgement to free room.
        tokio::select! {
            _ = space => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
    shared.reports_ready.notify_one();
}
