//! The `Postings` service: a feed's postings in discovery order, paged by cursor.

use super::page_limit;
use crate::ingest::Ingestor;
use crate::store::KvBackend;
use kairos_proto::v1 as pb;
use kairos_proto::v1::postings_server::Postings;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// `Postings` over the ingest store.
pub struct PostingsService<B> {
    ingest: Arc<Ingestor<B>>,
}

impl<B> PostingsService<B> {
    /// A service over `ingest`.
    pub fn new(ingest: Arc<Ingestor<B>>) -> Self {
        PostingsService { ingest }
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
            Some(Scope::UserId(_)) => {
                return Err(Status::unimplemented(
                    "postings by user are not available yet; ask per feed",
                ))
            }
            None => return Err(Status::invalid_argument("give a feed_id")),
        };
        let page = self
            .ingest
            .list(&feed, &r.cursor, page_limit(r.limit))
            .await?;
        let postings = page
            .postings
            .into_iter()
            .map(|p| pb::FeedPosting {
                feed_id: feed.clone(),
                posting: Some(pb::Posting {
                    item_id_hash: p.item_id_hash,
                    link: p.link.unwrap_or_default(),
                    title: p.title.unwrap_or_default(),
                    published_unix_ms: p.published_unix_ms,
                    discovered_unix_ms: p.discovered_unix_ms,
                }),
            })
            .collect();
        Ok(Response::new(pb::ListPostingsResponse {
            postings,
            next_cursor: page.next_cursor,
        }))
    }
}
