//! The `Admin` service: feeds, users, subscriptions and OPML import over the registry.
//! Settings (validated, persisted, applied on the next replan), per-feed plan inspection,
//! stats and workers come from the live hub.

use super::page_limit;
use crate::control::feedstate::FeedState;
use crate::control::relearn::Budget;
use crate::hub::Hub;
use crate::registry::{FeedRecord, Registry, UserRecord};
use crate::settings::SettingsPatch;
use crate::store::KvBackend;
use crate::time::DAY_MS;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_server::Admin;
use std::collections::HashMap;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// `Admin` over a registry (reads and subscriptions) and the live hub (feeds and users
/// come and go through it, so its access statistics stay in step; settings, plans, stats
/// and workers are its answers).
pub struct AdminService<B> {
    registry: Registry<B>,
    hub: Arc<Hub<B>>,
}

impl<B: KvBackend> AdminService<B> {
    /// A service over `registry` and `hub`.
    pub fn new(registry: Registry<B>, hub: Arc<Hub<B>>) -> Self {
        AdminService { registry, hub }
    }

    async fn settings_view(&self) -> pb::Settings {
        let (s, planned) = self.hub.settings_and_feeds_planned().await;
        pb::Settings {
            budget_fetches_per_day: s.budget.per_day(planned),
            metric: s.metric.name().into(),
            policy: s.policy.name().into(),
            min_fetches_per_day: s.min_fetches_per_day,
            max_fetches_per_day: s.max_fetches_per_day.unwrap_or(0.0),
            max_fetches_per_host_per_day: 0.0,
            slots: s.slots as u32,
            replan_interval_seconds: self.hub.config().replan_interval.as_secs() as u32,
            budget_fetches_per_feed_per_day: match s.budget {
                Budget::PerFeedPerDay(x) => x,
                Budget::PerDay(_) => 0.0,
            },
        }
    }

    /// A feed record with its fetch health.
    async fn feed(&self, r: FeedRecord) -> pb::Feed {
        self.feeds(vec![r])
            .await
            .pop()
            .expect("one feed in, one out")
    }

    /// Feed records with their fetch health (one message to the hub for the page).
    async fn feeds(&self, records: Vec<FeedRecord>) -> Vec<pb::Feed> {
        let ids = records.iter().map(|r| r.id.clone()).collect();
        let health = self.hub.feed_health_many(ids).await;
        records
            .into_iter()
            .zip(health)
            .map(|(r, h)| pb::Feed {
                feed_id: r.id,
                url: r.url,
                weight: r.weight,
                host: r.host,
                status: h.status.into(),
                consecutive_failures: h.consecutive_failures,
                last_error: h.last_error,
                title: h.meta.title,
                site_url: h.meta.site_url,
                format: h.meta.format,
                websub_hubs: h.meta.hubs,
                websub_topic: h.meta.topic,
                push_state: h.push.0,
                push_hub: h.push.1,
                push_poll_share: h.push.2,
            })
            .collect()
    }
}

fn user(r: UserRecord) -> pb::User {
    pb::User {
        user_id: r.id,
        weight: r.weight,
    }
}

#[tonic::async_trait]
impl<B: KvBackend> Admin for AdminService<B> {
    async fn add_feed(&self, r: Request<pb::AddFeedRequest>) -> Result<Response<pb::Feed>, Status> {
        let r = r.into_inner();
        let id = (!r.feed_id.is_empty()).then_some(r.feed_id.as_str());
        let added = self.hub.add_feed(id, &r.url, r.weight).await?;
        Ok(Response::new(self.feed(added).await))
    }

    async fn remove_feed(
        &self,
        r: Request<pb::RemoveFeedRequest>,
    ) -> Result<Response<pb::RemoveFeedResponse>, Status> {
        let id = r.into_inner().feed_id;
        self.hub.remove_feed(&id).await?;
        Ok(Response::new(pb::RemoveFeedResponse {}))
    }

    async fn resume_feed(
        &self,
        r: Request<pb::ResumeFeedRequest>,
    ) -> Result<Response<pb::Feed>, Status> {
        let id = r.into_inner().feed_id;
        let rec = self.registry.get_feed(&id).await?;
        self.hub.resume_feed(&id).await.map_err(|e| {
            tracing::error!(feed = %id, error = %e, "resume failed");
            Status::unavailable(format!("could not store the feed's state: {e}"))
        })?;
        Ok(Response::new(self.feed(rec).await))
    }

    async fn list_feeds(
        &self,
        r: Request<pb::ListFeedsRequest>,
    ) -> Result<Response<pb::ListFeedsResponse>, Status> {
        let r = r.into_inner();
        let after = (!r.after_feed_id.is_empty()).then_some(r.after_feed_id.as_str());
        let feeds = self.registry.list_feeds(after, page_limit(r.limit)).await?;
        Ok(Response::new(pb::ListFeedsResponse {
            feeds: self.feeds(feeds).await,
        }))
    }

    async fn get_feed(&self, r: Request<pb::GetFeedRequest>) -> Result<Response<pb::Feed>, Status> {
        let rec = self.registry.get_feed(&r.into_inner().feed_id).await?;
        Ok(Response::new(self.feed(rec).await))
    }

    async fn add_user(&self, r: Request<pb::AddUserRequest>) -> Result<Response<pb::User>, Status> {
        let r = r.into_inner();
        let added = self.hub.add_user(&r.user_id, r.weight).await?;
        Ok(Response::new(user(added)))
    }

    async fn remove_user(
        &self,
        r: Request<pb::RemoveUserRequest>,
    ) -> Result<Response<pb::RemoveUserResponse>, Status> {
        let id = r.into_inner().user_id;
        self.hub.remove_user(&id).await?;
        Ok(Response::new(pb::RemoveUserResponse {}))
    }

    async fn list_users(
        &self,
        r: Request<pb::ListUsersRequest>,
    ) -> Result<Response<pb::ListUsersResponse>, Status> {
        let r = r.into_inner();
        let after = (!r.after_user_id.is_empty()).then_some(r.after_user_id.as_str());
        let users = self.registry.list_users(after, page_limit(r.limit)).await?;
        Ok(Response::new(pb::ListUsersResponse {
            users: users.into_iter().map(user).collect(),
        }))
    }

    async fn get_user(&self, r: Request<pb::GetUserRequest>) -> Result<Response<pb::User>, Status> {
        Ok(Response::new(user(
            self.registry.get_user(&r.into_inner().user_id).await?,
        )))
    }

    async fn subscribe(
        &self,
        r: Request<pb::SubscribeRequest>,
    ) -> Result<Response<pb::Subscription>, Status> {
        let r = r.into_inner();
        self.registry.subscribe(&r.user_id, &r.feed_id).await?;
        Ok(Response::new(pb::Subscription {
            user_id: r.user_id,
            feed_id: r.feed_id,
        }))
    }

    async fn unsubscribe(
        &self,
        r: Request<pb::UnsubscribeRequest>,
    ) -> Result<Response<pb::UnsubscribeResponse>, Status> {
        let r = r.into_inner();
        self.registry.unsubscribe(&r.user_id, &r.feed_id).await?;
        Ok(Response::new(pb::UnsubscribeResponse {}))
    }

    async fn list_subscriptions(
        &self,
        r: Request<pb::ListSubscriptionsRequest>,
    ) -> Result<Response<pb::ListSubscriptionsResponse>, Status> {
        use pb::list_subscriptions_request::Scope;
        let subscriptions = match r.into_inner().scope {
            Some(Scope::UserId(u)) => {
                self.registry.get_user(&u).await?;
                self.registry
                    .subscriptions(&u)
                    .await?
                    .into_iter()
                    .map(|f| pb::Subscription {
                        user_id: u.clone(),
                        feed_id: f,
                    })
                    .collect()
            }
            Some(Scope::FeedId(f)) => {
                self.registry.get_feed(&f).await?;
                self.registry
                    .subscribers(&f)
                    .await?
                    .into_iter()
                    .map(|u| pb::Subscription {
                        user_id: u,
                        feed_id: f.clone(),
                    })
                    .collect()
            }
            None => return Err(Status::invalid_argument("give a user_id or a feed_id")),
        };
        Ok(Response::new(pb::ListSubscriptionsResponse {
            subscriptions,
        }))
    }

    async fn import_opml(
        &self,
        r: Request<pb::ImportOpmlRequest>,
    ) -> Result<Response<pb::ImportOpmlResponse>, Status> {
        let r = r.into_inner();
        let user = (!r.user_id.is_empty()).then_some(r.user_id.as_str());
        let got = self.hub.import_opml(&r.opml, user).await?;
        Ok(Response::new(pb::ImportOpmlResponse {
            feeds_added: got.feeds_added,
            feeds_already_present: got.feeds_already_present,
            subscriptions_added: got.subscriptions_added,
            skipped: got.skipped,
        }))
    }

    async fn get_settings(
        &self,
        _r: Request<pb::GetSettingsRequest>,
    ) -> Result<Response<pb::Settings>, Status> {
        Ok(Response::new(self.settings_view().await))
    }

    async fn update_settings(
        &self,
        r: Request<pb::SettingsPatch>,
    ) -> Result<Response<pb::Settings>, Status> {
        let r = r.into_inner();
        use pb::settings_patch::Budget as B;
        let patch = SettingsPatch {
            budget: r.budget.map(|b| match b {
                B::FetchesPerDay(m) => Budget::PerDay(m),
                B::FetchesPerFeedPerDay(x) => Budget::PerFeedPerDay(x),
            }),
            metric: r.metric,
            policy: r.policy,
            min_fetches_per_day: r.min_fetches_per_day,
            max_fetches_per_day: r.max_fetches_per_day,
            slots: r.slots,
        };
        self.hub.update_settings(&patch).await?;
        Ok(Response::new(self.settings_view().await))
    }

    async fn inspect_feed_plan(
        &self,
        r: Request<pb::InspectFeedPlanRequest>,
    ) -> Result<Response<pb::FeedPlanView>, Status> {
        let id = r.into_inner().feed_id;
        // Unknown feeds are NOT_FOUND; known but not yet planned ones are UNAVAILABLE.
        self.registry.get_feed(&id).await?;
        let health = self.hub.feed_health(&id).await;
        if health.status == "gone" {
            return Err(Status::failed_precondition(format!(
                "feed `{id}` answered 410 Gone and is no longer planned ({}); ResumeFeed fetches it again",
                health.last_error
            )));
        }
        let v = self.hub.inspect(&id).await.ok_or_else(|| {
            Status::unavailable(format!(
                "feed `{id}` is not planned yet; it will be after the next replan"
            ))
        })?;
        Ok(Response::new(pb::FeedPlanView {
            feed_id: id,
            posting_rate_per_hour: v.posting_rate_per_hour,
            access_rate_per_hour: v.access_rate_per_hour,
            fetches_per_day: v.fetches_per_day,
            fetch_offsets_seconds: v.offsets_seconds,
            period_seconds: v.period_seconds,
            expected_delay_seconds: v.expected_delay_seconds,
            observed_postings: v.observed_postings as u64,
            constraints: v.constraints,
            max_fetches_per_day: v.max_fetches_per_day.unwrap_or(0.0),
            not_before_unix_ms: v.not_before_unix_ms,
            status: v.status.into(),
        }))
    }

    async fn get_stats(
        &self,
        _r: Request<pb::GetStatsRequest>,
    ) -> Result<Response<pb::Stats>, Status> {
        let t = self.hub.totals().await;
        let workers = self.hub.workers().await;
        let plan = t.last_plan.clone().unwrap_or_default();
        let stored = self.hub.serving_stored_plan().await;
        Ok(Response::new(pb::Stats {
            feeds: self.registry.all_feeds().await?.len() as u64,
            users: self.registry.all_users().await?.len() as u64,
            subscriptions: self.hub.subscriptions().await as u64,
            workers: workers.len() as u32,
            budget_fetches_per_day: plan.budget_per_day,
            allocated_fetches_per_day: plan.fetches_per_day,
            fetches_total: t.fetches,
            postings_total: t.postings_new,
            realized_avg_delay_seconds: if t.delay_count > 0 {
                t.delay_sum_ms / t.delay_count as f64 / 1000.0
            } else {
                0.0
            },
            expected_avg_delay_seconds: plan.expected_delay_seconds,
            report_backlog: workers.iter().map(|w| w.report_backlog).sum(),
            fetches_same_slot: t.fetches_same_slot,
            stored_plan_written_unix_ms: stored.map_or(0, |s| s.1),
            stored_plan_feeds: stored.map_or(0, |s| s.0 as u64),
            capacity_floor_fetches_per_day: plan.capacity_floor_fetches_per_day,
            expected_lost_postings_per_day: plan.expected_lost_per_day,
            feeds_overdue: plan.overdue_feeds as u64,
        }))
    }

    async fn set_host_limit(
        &self,
        r: Request<pb::SetHostLimitRequest>,
    ) -> Result<Response<pb::HostLimit>, Status> {
        let r = r.into_inner();
        let set = self
            .hub
            .set_host_limit(&r.host, r.max_fetches_per_day)
            .await?;
        Ok(Response::new(match set {
            Some(l) => pb::HostLimit {
                host: l.host,
                max_fetches_per_day: l.max_fetches_per_day,
            },
            None => pb::HostLimit {
                host: r.host.trim().to_ascii_lowercase(),
                max_fetches_per_day: 0.0,
            },
        }))
    }

    async fn list_host_limits(
        &self,
        _r: Request<pb::ListHostLimitsRequest>,
    ) -> Result<Response<pb::ListHostLimitsResponse>, Status> {
        Ok(Response::new(pb::ListHostLimitsResponse {
            limits: self
                .hub
                .host_limits()
                .await
                .into_iter()
                .map(|l| pb::HostLimit {
                    host: l.host,
                    max_fetches_per_day: l.max_fetches_per_day,
                })
                .collect(),
        }))
    }

    async fn list_feed_history(
        &self,
        r: Request<pb::ListFeedHistoryRequest>,
    ) -> Result<Response<pb::ListFeedHistoryResponse>, Status> {
        let r = r.into_inner();
        let after = (!r.after_feed_id.is_empty()).then_some(r.after_feed_id.as_str());
        let records = self.registry.list_feeds(after, page_limit(r.limit)).await?;
        let states = self
            .hub
            .feed_states(records.iter().map(|f| f.id.clone()).collect())
            .await;
        let now_ms = self.hub.clock().now_ms();
        let window_ms = (self.hub.config().planner.window_days * DAY_MS as f64) as i64;
        Ok(Response::new(pb::ListFeedHistoryResponse {
            feeds: history_page(records, &states, MAX_HISTORY_TIMES),
            now_unix_ms: now_ms,
            window_start_unix_ms: now_ms - window_ms,
        }))
    }

    async fn list_workers(
        &self,
        _r: Request<pb::ListWorkersRequest>,
    ) -> Result<Response<pb::ListWorkersResponse>, Status> {
        let workers = self
            .hub
            .workers()
            .await
            .into_iter()
            .map(|w| pb::WorkerView {
                worker_id: w.id,
                worker_name: w.name,
                capacity_fetches_per_second: w.capacity,
                hosts: w.hosts as u32,
                feeds: w.feeds as u32,
                last_heartbeat_unix_ms: w.last_heartbeat_unix_ms,
                desired_version: w.version,
                applied_version: w.applied_version,
                in_flight: w.in_flight,
                report_backlog: w.report_backlog,
                clock_offset_ms: w.clock_offset_ms.unwrap_or(0),
            })
            .collect();
        Ok(Response::new(pb::ListWorkersResponse { workers }))
    }
}

/// Posting times one `ListFeedHistory` page holds at most (about 8 bytes each on the wire):
/// a page ends after the feed that reaches it.
const MAX_HISTORY_TIMES: usize = 250_000;

/// The histories of `records`, in order, ending after the feed that brings the page to
/// `cap` posting times (a feed's list is at most `MAX_OBSERVATIONS`), so a page stays a few
/// MB whatever limit was asked; the client asks again after its last feed.
fn history_page(
    records: Vec<FeedRecord>,
    states: &HashMap<String, Arc<FeedState>>,
    cap: usize,
) -> Vec<pb::FeedHistory> {
    let mut page = Vec::with_capacity(records.len());
    let mut times = 0usize;
    for f in records {
        if times >= cap {
            break;
        }
        let st = states.get(&f.id).map(Arc::as_ref);
        let h = history(f, st);
        times += h.posting_unix_ms.len() + h.undated_from_unix_ms.len();
        page.push(h);
    }
    page
}

/// A feed's record and the posting history its learned state holds (none yet: no times).
fn history(f: FeedRecord, st: Option<&FeedState>) -> pb::FeedHistory {
    let (from, to) = st.map_or_else(Default::default, |st| st.spread_ms.iter().copied().unzip());
    pb::FeedHistory {
        feed_id: f.id,
        url: f.url,
        weight: f.weight,
        host: f.host,
        watched_since_unix_ms: st.and_then(|st| st.observed_since_ms).unwrap_or(0),
        posting_unix_ms: st.map_or_else(Vec::new, |st| st.postings_ms.iter().copied().collect()),
        undated_from_unix_ms: from,
        undated_to_unix_ms: to,
        last_answered_unix_ms: st.and_then(|st| st.last_answered_ms).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> FeedRecord {
        FeedRecord {
            id: id.into(),
            url: format!("https://{id}.example/feed.xml"),
            host: format!("{id}.example"),
            weight: 1.0,
        }
    }

    #[test]
    fn a_history_page_ends_after_the_feed_that_reaches_the_cap_and_names_every_time() {
        let mut states = HashMap::new();
        for (id, n) in [("a", 3), ("b", 4), ("c", 1)] {
            let mut st = FeedState {
                observed_since_ms: Some(1_000),
                last_answered_ms: Some(9_000),
                ..FeedState::default()
            };
            st.postings_ms = (0..n).map(|i| 2_000 + i).collect();
            st.spread_ms.push_back((5_000, 7_000));
            states.insert(id.to_string(), Arc::new(st));
        }
        let records = || ["a", "b", "c", "d"].map(record).to_vec();
        // a holds 4 times, b 5: a cap of 6 ends the page after b.
        let page = history_page(records(), &states, 6);
        assert_eq!(
            page.iter().map(|h| h.feed_id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(page[1].posting_unix_ms, [2_000, 2_001, 2_002, 2_003]);
        assert_eq!(
            (
                page[1].undated_from_unix_ms.clone(),
                page[1].undated_to_unix_ms.clone()
            ),
            (vec![5_000], vec![7_000])
        );
        assert_eq!(
            (page[1].watched_since_unix_ms, page[1].last_answered_unix_ms),
            (1_000, 9_000)
        );
        // Without a cap in reach every feed comes, one never fetched with no times.
        let page = history_page(records(), &states, 1_000);
        assert_eq!(page.len(), 4);
        let never = &page[3];
        assert_eq!(
            (never.watched_since_unix_ms, never.last_answered_unix_ms),
            (0, 0)
        );
        assert!(never.posting_unix_ms.is_empty() && never.undated_from_unix_ms.is_empty());
        assert_eq!(never.host, "d.example");
    }
}
