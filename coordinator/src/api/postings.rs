//! The `Postings` service: a feed's postings in discovery order, or a user's (the postings
//! of the feeds they subscribe to, in global discovery order), paged by cursor.

use super::page_limit;
use crate::ingest::{Ingestor, PostingRecord};
use crate::registry::Registry;
use crate::store::KvBackend;
use kairos_proto::v1 as pb;
use kairos_proto::v1::postings_server::Postings;
use std::collections::HashSet;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Index entries read at most per by-user page (a short page is returned with an advanced
/// cursor rather than scanning without bound for a user with few subscriptions).
const USER_SCAN: usize = 20_000;

/// `Postings` over the ingest store.
pub struct PostingsService<B> {
    ingest: Arc<Ingestor<B>>,
    registry: Registry<B>,
}

impl<B> PostingsService<B> {
    /// A service over `ingest`, resolving users' subscriptions in `registry`.
    pub fn new(ingest: Arc<Ingestor<B>>, registry: Registry<B>) -> Self {
        PostingsService { ingest, registry }
    }
}

fn posting(feed_id: String, p: PostingRecord) -> pb::FeedPosting {
    pb::FeedPosting {
        feed_id,
        posting: Some(pb::Posting {
            item_id_hash: p.item_id_hash,
            link: p.link.unwrap_or_default(),
            title: p.title.unwrap_or_default(),
            published_unix_ms: p.published_unix_ms,
            discovered_unix_ms: p.discovered_unix_ms,
        }),
    }
}

#[tonic::async_trait]
impl<B: KvBackend> Postings for PostingsService<B> {
    async fn list_postings(
        &self,
        r: Request<pb::ListPostingsRequest>,
    ) -> Result<Response<pb::ListPostingsResponse>, Status> {
        use pb::list_postings_request::Scope;
        let r = r.into_inner();
        let feed = match r.scope {
            Some(Scope::FeedId(f)) => f,
            Some(Scope::UserId(user)) => {
                self.registry.get_user(&user).await?;
                let feeds: HashSet<String> = self
                    .registry
                    .subscriptions(&user)
                    .await?
                    .into_iter()
                    .collect();
                let limit = page_limit(r.limit);
                let (page, next_cursor) = self
                    .ingest
                    .list_for(&feeds, &r.cursor, limit, USER_SCAN)
                    .await?;
                return Ok(Response::new(pb::ListPostingsResponse {
                    postings: page.into_iter().map(|(f, p)| posting(f, p)).collect(),
                    next_cursor,
                }));
            }
            None => return Err(Status::invalid_argument("give a feed_id or a user_id")),
        };
        let page = self
            .ingest
            .list(&feed, &r.cursor, page_limit(r.limit))
            .await?;
        let postings = page
            .postings
            .into_iter()
            .map(|p| posting(feed.clone(), p))
            .collect();
        Ok(Response::new(pb::ListPostingsResponse {
            postings,
            next_cursor: page.next_cursor,
        }))
    }
}
