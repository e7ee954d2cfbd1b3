//! One-off work from the coordinator besides the schedule, on the session's task stream
//! (docs/WEBSUB.md): WebSub requests to send to hubs, answered in the report stream, and
//! documents a hub pushed for a feed this worker owns, read by the same reader as a fetched
//! document and reported as a delivery (outcome PUSHED: no fetch, no budget).

use super::fetching::{push_report, send_report, take_new};
use super::{Client, Shared};
use crate::fetch::Fetcher;
use crate::telemetry;
use kairos_proto::bounds;
use kairos_proto::v1 as pb;
use pb::report_message::Body;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Tasks run at once at most (a hub that answers slowly holds one each).
const PARALLEL: usize = 16;

/// Receives the session's tasks and runs them until the stream fails. A coordinator
/// without the task stream (an older version) leaves the session to its other streams.
pub(super) async fn tasks(
    mut client: Client,
    worker_id: &str,
    shared: &Arc<Shared>,
    fetcher: Fetcher,
) -> Result<(), tonic::Status> {
    let mut stream = match client
        .tasks(pb::TasksRequest {
            worker_id: worker_id.to_string(),
        })
        .await
    {
        Ok(s) => s.into_inner(),
        Err(e) if e.code() == tonic::Code::Unimplemented => {
            tracing::info!("the coordinator hands out no tasks (no WebSub push)");
            return std::future::pending().await;
        }
        Err(e) => return Err(e),
    };
    let permits = Arc::new(Semaphore::new(PARALLEL));
    loop {
        let Some(task) = stream.message().await? else {
            return Err(tonic::Status::unavailable("task stream ended"));
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return Ok(());
        };
        let (shared, fetcher) = (shared.clone(), fetcher.clone());
        tokio::spawn(async move {
            match task.task {
                Some(pb::worker_task::Task::HubRequest(r)) => {
                    hub_request(&shared, &fetcher, r).await
                }
                Some(pb::worker_task::Task::Pushed(d)) => pushed(&shared, d).await,
                None => {}
            }
            drop(permit);
        });
    }
}

/// Sends a subscription request to its hub and reports the answer.
async fn hub_request(shared: &Shared, fetcher: &Fetcher, r: pb::HubRequest) {
    let lease = r.lease_seconds.to_string();
    let mut form: Vec<(&str, &str)> = vec![
        ("hub.mode", r.mode.as_str()),
        ("hub.topic", r.topic.as_str()),
        ("hub.callback", r.callback_url.as_str()),
    ];
    if r.mode == "subscribe" {
        if !r.secret.is_empty() {
            form.push(("hub.secret", r.secret.as_str()));
        }
        if r.lease_seconds > 0 {
            form.push(("hub.lease_seconds", lease.as_str()));
        }
    }
    // A hub that neither answers nor refuses must not hold a task slot for ever.
    let answer =
        match tokio::time::timeout(Duration::from_secs(60), fetcher.hub_request(&r.hub, &form))
            .await
        {
            Ok(a) => a,
            Err(_) => Err("the hub did not answer within 60 s".to_string()),
        };
    let result = if answer.is_ok() {
        "accepted"
    } else {
        "refused"
    };
    metrics::counter!(telemetry::PUSH_TASKS_TOTAL, "task" => "hub_request", "result" => result)
        .increment(1);
    if let Err(e) = &answer {
        tracing::info!(feed = %r.feed_id, hub = %r.hub, mode = %r.mode, error = %e, "a hub request failed");
    }
    let mut a = pb::HubAnswer {
        feed_id: r.feed_id,
        mode: r.mode,
        hub: r.hub,
        accepted: answer.is_ok(),
        accepted_by: answer.as_ref().ok().cloned().flatten().unwrap_or_default(),
        error: answer.err().unwrap_or_default(),
    };
    bounds::clip_hub_answer(&mut a);
    push_report(shared, Body::HubAnswer(a)).await;
}

/// Reads a pushed document and reports its new items as a delivery.
async fn pushed(shared: &Shared, d: pb::PushedDocument) {
    let count = |result: &'static str| {
        metrics::counter!(telemetry::PUSH_TASKS_TOTAL, "task" => "pushed", "result" => result)
            .increment(1)
    };
    let url = {
        let st = shared.state.lock().expect("worker state");
        match st.feeds.get(&d.feed_id) {
            Some(f) => f.url.clone(),
            None => {
                // Moved to another worker meanwhile: its polls find these postings.
                count("not_owned");
                return;
            }
        }
    };
    let received = d.received_unix_ms;
    let bytes = d.body.len() as u64;
    let base = if d.topic.is_empty() {
        url.clone()
    } else {
        d.topic.clone()
    };
    let doc = shared.reader.read(&d.feed_id, d.body, url, base).await;
    if let Some(why) = doc.malformed.as_ref().or(doc.unrecognised.as_ref()) {
        count("unreadable");
        tracing::info!(feed = %d.feed_id, error = %why, "a pushed document could not be read; its postings wait for a poll");
        return;
    }
    let items_in_document = doc.items.len().min(u32::MAX as usize) as u32;
    let mut report = pb::FetchReport {
        feed_id: d.feed_id.clone(),
        outcome: pb::FetchOutcome::Pushed as i32,
        scheduled_unix_ms: received,
        started_unix_ms: received,
        finished_unix_ms: received,
        body_bytes: bytes,
        items_in_document,
        ..Default::default()
    };
    let (withheld, clipped) = {
        let mut st = shared.state.lock().expect("worker state");
        let Some(info) = st.feeds.get_mut(&d.feed_id) else {
            count("not_owned");
            return;
        };
        take_new(info, doc.items, received, &mut report)
    };
    if report.new_postings.is_empty() {
        count("nothing_new");
        return;
    }
    count("reported");
    send_report(shared, report, withheld, clipped).await;
}
