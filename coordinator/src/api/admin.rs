//! The `Admin` service: feeds, users, subscriptions and OPML import over the registry.
//! Settings, plan inspection, stats and workers arrive with the relearn loop and the worker
//! protocol; until then those calls answer `UNIMPLEMENTED` with a message saying so.

use super::ingest::SharedAccessStats;
use super::page_limit;
use crate::registry::{FeedRecord, Registry, UserRecord};
use crate::store::KvBackend;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_server::Admin;
use tonic::{Request, Response, Status};

/// `Admin` over a registry; keeps the access statistics' view of users and feeds current.
pub struct AdminService<B> {
    registry: Registry<B>,
    access: SharedAccessStats,
}

impl<B> AdminService<B> {
    /// A service over `registry` that also registers users and feeds in `access`.
    pub fn new(registry: Registry<B>, access: SharedAccessStats) -> Self {
        AdminService { registry, access }
    }

    fn with_access(&self, f: impl FnOnce(&mut crate::access::AccessStats)) {
        // A poisoned lock only means a panic elsewhere; the statistics themselves are fine.
        let mut stats = self.access.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut stats);
    }
}

fn feed(r: FeedRecord) -> pb::Feed {
    pb::Feed {
        feed_id: r.id,
        url: r.url,
        weight: r.weight,
        host: r.host,
    }
}

fn user(r: UserRecord) -> pb::User {
    pb::User {
        user_id: r.id,
        weight: r.weight,
    }
}

fn not_yet(what: &str) -> Status {
    Status::unimplemented(format!(
        "{what} is not available yet in this version of the coordinator"
    ))
}

#[tonic::async_trait]
impl<B: KvBackend> Admin for AdminService<B> {
    async fn add_feed(&self, r: Request<pb::AddFeedRequest>) -> Result<Response<pb::Feed>, Status> {
        let r = r.into_inner();
        let id = (!r.feed_id.is_empty()).then_some(r.feed_id.as_str());
        let added = self.registry.add_feed(id, &r.url, r.weight).await?;
        self.with_access(|a| a.set_feed(&added.id));
        metrics::gauge!(crate::metrics::REGISTRY_FEEDS).increment(1.0);
        Ok(Response::new(feed(added)))
    }

    async fn remove_feed(
        &self,
        r: Request<pb::RemoveFeedRequest>,
    ) -> Result<Response<pb::RemoveFeedResponse>, Status> {
        let id = r.into_inner().feed_id;
        self.registry.remove_feed(&id).await?;
        self.with_access(|a| a.remove_feed(&id));
        metrics::gauge!(crate::metrics::REGISTRY_FEEDS).decrement(1.0);
        Ok(Response::new(pb::RemoveFeedResponse {}))
    }

    async fn list_feeds(
        &self,
        r: Request<pb::ListFeedsRequest>,
    ) -> Result<Response<pb::ListFeedsResponse>, Status> {
        let r = r.into_inner();
        let after = (!r.after_feed_id.is_empty()).then_some(r.after_feed_id.as_str());
        let feeds = self.registry.list_feeds(after, page_limit(r.limit)).await?;
        Ok(Response::new(pb::ListFeedsResponse {
            feeds: feeds.into_iter().map(feed).collect(),
        }))
    }

    async fn get_feed(&self, r: Request<pb::GetFeedRequest>) -> Result<Response<pb::Feed>, Status> {
        Ok(Response::new(feed(
            self.registry.get_feed(&r.into_inner().feed_id).await?,
        )))
    }

    async fn add_user(&self, r: Request<pb::AddUserRequest>) -> Result<Response<pb::User>, Status> {
        let r = r.into_inner();
        let added = self.registry.add_user(&r.user_id, r.weight).await?;
        self.with_access(|a| a.set_user(&added.id, added.weight as f32));
        metrics::gauge!(crate::metrics::REGISTRY_USERS).increment(1.0);
        Ok(Response::new(user(added)))
    }

    async fn remove_user(
        &self,
        r: Request<pb::RemoveUserRequest>,
    ) -> Result<Response<pb::RemoveUserResponse>, Status> {
        let id = r.into_inner().user_id;
        self.registry.remove_user(&id).await?;
        self.with_access(|a| a.remove_user(&id));
        metrics::gauge!(crate::metrics::REGISTRY_USERS).decrement(1.0);
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
        let got = self.registry.import_opml(&r.opml, user).await?;
        // Imported feeds are new to the access statistics as well.
        self.with_access(|a| got.added_ids.iter().for_each(|f| a.set_feed(f)));
        metrics::gauge!(crate::metrics::REGISTRY_FEEDS).increment(got.added_ids.len() as f64);
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
        Err(not_yet("GetSettings"))
    }

    async fn update_settings(
        &self,
        _r: Request<pb::Settings>,
    ) -> Result<Response<pb::Settings>, Status> {
        Err(not_yet("UpdateSettings"))
    }

    async fn inspect_feed_plan(
        &self,
        _r: Request<pb::InspectFeedPlanRequest>,
    ) -> Result<Response<pb::FeedPlanView>, Status> {
        Err(not_yet("InspectFeedPlan"))
    }

    async fn get_stats(
        &self,
        _r: Request<pb::GetStatsRequest>,
    ) -> Result<Response<pb::Stats>, Status> {
        Err(not_yet("GetStats"))
    }

    async fn list_workers(
        &self,
        _r: Request<pb::ListWorkersRequest>,
    ) -> Result<Response<pb::ListWorkersResponse>, Status> {
        Err(not_yet("ListWorkers"))
    }
}
