//! What the coordinator assigns, applied: the assignment stream's split updates put back
//! together, each feed's identity (URL, validators, seen ids) taken over, and its fetch
//! times handed to the [`Schedule`](kairos_runtime::schedule::Schedule).

use super::{Client, FeedInfo, Shared};
use crate::fetch::Validators;
use crate::telemetry;
use kairos_proto::v1 as pb;
use kairos_runtime::schedule::FeedTimes;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn feed_times(a: &pb::FeedAssignment) -> FeedTimes {
    FeedTimes::from_seconds(
        &a.feed_id,
        &a.host,
        &a.fetch_offsets_seconds,
        a.period_seconds,
        a.period_origin_unix_ms,
    )
    .with_timed(a.timed)
}

/// Takes over the feed's identity from an assignment; validators and seen ids of a feed
/// this worker already fetches are its own and fresher.
pub(super) fn adopt(feeds: &mut HashMap<String, FeedInfo>, a: &pb::FeedAssignment) {
    let info = feeds.entry(a.feed_id.clone()).or_insert_with(|| FeedInfo {
        url: a.url.clone(),
        validators: Validators {
            etag: Some(a.etag.clone()).filter(|s| !s.is_empty()),
            last_modified: Some(a.last_modified.clone()).filter(|s| !s.is_empty()),
        },
        seen: HashSet::new(),
        order: VecDeque::new(),
        not_before_ms: i64::MIN,
        held_until_ms: 0,
        skip_hours: 0,
        skip_days: 0,
        expedited: false,
        first_fetch_ms: 0,
        fetched: false,
    });
    // A first fetch the coordinator moved: queued again at its new time (`0` means the
    // feed has been seen; an earlier time stands then).
    if a.first_fetch_unix_ms != 0 && a.first_fetch_unix_ms != info.first_fetch_ms {
        info.first_fetch_ms = a.first_fetch_unix_ms;
        if !info.fetched {
            info.expedited = false;
        }
    }
    info.url = a.url.clone();
    info.held_until_ms = a.not_before_unix_ms;
    info.skip_hours = a.skip_hours_mask;
    info.skip_days = a.skip_days_mask;
    for &id in &a.recent_item_id_hashes {
        info.remember(id);
    }
}

/// Hands the schedule the feed's last answered fetch as the coordinator knows it (made
/// by this worker or, for a feed taken over, by another), so its next fetch is spaced from
/// it. A time after `now_ms` (clocks apart, or a bad value) counts as now: the schedule
/// adds gaps to it, which must not overflow.
fn note_last_fetch(
    schedule: &mut kairos_runtime::schedule::Schedule,
    a: &pb::FeedAssignment,
    now_ms: i64,
) {
    if a.last_fetch_unix_ms > 0 {
        schedule.note_last_fetch(
            &a.feed_id,
            a.last_fetch_unix_ms.min(now_ms),
            a.last_fetch_first_sight,
        );
    }
}

/// Folds the parts of a split update (`more` set on all but the last) into one; returns
/// the update once whole. A part of another version than the one held starts afresh: the
/// coordinator sends a version's parts back to back, so the held ones were abandoned.
pub(super) fn assemble(
    pending: &mut Option<(u64, pb::assignment_update::Update)>,
    u: pb::AssignmentUpdate,
) -> Option<pb::AssignmentUpdate> {
    use pb::assignment_update::Update;
    let Some(part) = u.update else {
        return Some(u);
    };
    let held = match pending.take() {
        Some((v, held)) if v == u.version => Some(held),
        _ => None,
    };
    let (merged, more) = match (held, part) {
        (Some(Update::Snapshot(mut a)), Update::Snapshot(b)) => {
            a.feeds.extend(b.feeds);
            (Update::Snapshot(a), b.more)
        }
        (Some(Update::Delta(mut a)), Update::Delta(b)) => {
            a.upserts.extend(b.upserts);
            a.removed_feed_ids.extend(b.removed_feed_ids);
            (Update::Delta(a), b.more)
        }
        (_, part) => {
            let more = match &part {
                Update::Snapshot(s) => s.more,
                Update::Delta(d) => d.more,
            };
            (part, more)
        }
    };
    if more {
        *pending = Some((u.version, merged));
        return None;
    }
    Some(pb::AssignmentUpdate {
        update: Some(merged),
        ..u
    })
}

pub(super) async fn assignments(
    mut client: Client,
    id: &str,
    epoch: u64,
    shared: &Arc<Shared>,
) -> Result<(), tonic::Status> {
    let mut stream = client
        .assignments(pb::AssignmentsRequest {
            worker_id: id.to_string(),
            applied_version: 0,
        })
        .await?
        .into_inner();
    // Parts of a large update, held until its last part arrives (same version).
    let mut pending: Option<(u64, pb::assignment_update::Update)> = None;
    while let Some(u) = stream.message().await? {
        // An assignment of another epoch than the session's belongs to another leader's
        // view: not applied; the session ends and registers again for a fresh snapshot.
        if u.epoch != 0 && epoch != 0 && u.epoch != epoch {
            return Err(tonic::Status::failed_precondition(format!(
                "assignment of epoch {} on a session of epoch {epoch}; registering again",
                u.epoch
            )));
        }
        let Some(u) = assemble(&mut pending, u) else {
            continue;
        };
        let now = shared.clock.now_ms();
        tracing::debug!(version = u.version, update = ?u.update.as_ref().map(|x| match x {
            pb::assignment_update::Update::Snapshot(s) => format!("snapshot of {}", s.feeds.len()),
            pb::assignment_update::Update::Delta(d) => format!("delta +{} -{}", d.upserts.len(), d.removed_feed_ids.len()),
        }), "assignment update");
        let allowance = u.allowance.map(|a| kairos_runtime::allowance::Allowance {
            day: a.day,
            fetches: a.fetches,
            later_days: a.later_days,
            counted: a.counted,
            per_minute: (a.per_minute > 0).then_some(a.per_minute),
        });
        let mut st = shared.state.lock().expect("worker state");
        let st = &mut *st;
        // The allowance that comes with an update is in force before its feeds are
        // inserted: it decides whether their catch-ups fit today (a session's first
        // snapshot included, which now brings catch-ups from the feeds' last fetches).
        if u.version > st.schedule.version() {
            st.schedule.set_allowance(allowance, now);
        }
        let applied = match u.update {
            Some(pb::assignment_update::Update::Snapshot(s)) => {
                let keep: HashSet<&str> = s.feeds.iter().map(|a| a.feed_id.as_str()).collect();
                st.feeds.retain(|f, _| keep.contains(f.as_str()));
                for a in &s.feeds {
                    adopt(&mut st.feeds, a);
                    note_last_fetch(&mut st.schedule, a, now);
                }
                let times = s.feeds.iter().map(feed_times).collect();
                st.schedule.apply_snapshot(u.version, times, now)
            }
            Some(pb::assignment_update::Update::Delta(d)) => {
                for f in &d.removed_feed_ids {
                    st.feeds.remove(f);
                }
                for a in &d.upserts {
                    adopt(&mut st.feeds, a);
                    note_last_fetch(&mut st.schedule, a, now);
                }
                let times = d.upserts.iter().map(feed_times).collect();
                st.schedule
                    .apply_delta(u.version, times, &d.removed_feed_ids, now)
            }
            None => Ok(()),
        };
        match applied {
            Ok(()) => {
                // The day's allowance comes with every update (none: no cap beyond the
                // plan, as from a coordinator that deals none); set above.
                metrics::gauge!(telemetry::MINUTE_SHARE).set(
                    allowance
                        .and_then(|a| a.per_minute)
                        .map_or(-1.0, |m| m as f64),
                );
                metrics::gauge!(telemetry::DAY_ALLOWANCE).set(allowance.map_or(-1.0, |a| {
                    if a.day == now.div_euclid(kairos_runtime::allowance::DAY_MS) {
                        a.fetches as f64
                    } else {
                        a.later_days as f64
                    }
                }));
                shared
                    .stats
                    .applied_version
                    .store(u.version, Ordering::Relaxed);
                metrics::gauge!(telemetry::ASSIGNMENT_VERSION).set(u.version as f64);
                metrics::gauge!(telemetry::FEEDS).set(st.feeds.len() as f64);
                // Feeds nobody has fetched yet are fetched at once, or when the coordinator
                // paced their first fetch, to start learning them.
                let fresh: Vec<(String, i64)> = st
                    .feeds
                    .iter()
                    .filter(|(_, f)| f.never_fetched())
                    .map(|(id, f)| (id.clone(), f.first_fetch_ms.max(now)))
                    .collect();
                for (id, at) in fresh {
                    st.schedule.expedite(&id, at);
                    if let Some(f) = st.feeds.get_mut(&id) {
                        f.expedited = true;
                    }
                }
            }
            // Stale or bad updates change nothing; the next snapshot repairs the rest.
            Err(e) => tracing::warn!(error = %e, "assignment update ignored"),
        }
        shared.schedule_changed.notify_one();
    }
    Err(tonic::Status::unavailable("assignment stream ended"))
}
