//! The `Postings` service: a feed's postings in discovery order, or a user's (the postings
//! of the feeds they subscribe to, in global discovery order), paged by cursor.

use super::page_limit;
use crate::auth::{may_act_for, Identity};
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

/// Encoded bytes one page holds at most (beyond its first posting): a quarter of a default
/// gRPC client's 4 MiB limit, so a page is always readable whatever the feeds wrote.
pub const MAX_PAGE_BYTES: usize = 1 << 20;

/// A stored posting as served: title and link through [`crate::sanitize`] again, so postings
/// stored before those rules are served under them too.
fn posting(feed_id: String, p: PostingRecord) -> pb::FeedPosting {
    pb::FeedPosting {
        feed_id,
        posting: Some(pb::Posting {
            item_id_hash: p.item_id_hash,
            link: p
                .link
                .as_deref()
                .and_then(crate::sanitize::link)
                .unwrap_or_default(),
            title: p
                .title
                .as_deref()
                .map(crate::sanitize::title)
                .unwrap_or_default(),
            published_unix_ms: p.published_unix_ms,
            discovered_unix_ms: p.discovered_unix_ms,
        }),
    }
}

/// How many of `postings` (in order) fit [`MAX_PAGE_BYTES`]; at least one, so paging always
/// moves.
fn fitting(postings: &[pb::FeedPosting]) -> usize {
    use prost::Message;
    let mut bytes = 0;
    for (i, p) in postings.iter().enumerate() {
        bytes += p.encoded_len() + 4;
        if i > 0 && bytes > MAX_PAGE_BYTES {
            return i;
        }
    }
    postings.len()
}

#[tonic::async_trait]
impl<B: KvBackend> Postings for PostingsService<B> {
    async fn list_postings(
        &self,
        r: Request<pb::ListPostingsRequest>,
    ) -> Result<Response<pb::ListPostingsResponse>, Status> {
        use pb::list_postings_request::Scope;
        let identity = r.extensions().get::<Identity>().cloned();
        let r = r.into_inner();
        let feed = match r.scope {
            Some(Scope::FeedId(_)) if identity.as_ref().is_some_and(Identity::bound_to_users) => {
                return Err(Status::permission_denied(
                    "a token bound to users reads postings by user",
                ))
            }
            Some(Scope::FeedId(f)) => f,
            Some(Scope::UserId(user)) => {
                // Checked before the user is looked up: a user outside the token's binding
                // gets this answer whether or not they exist.
                if !may_act_for(identity.as_ref(), &user) {
                    return Err(Status::permission_denied(
                        "this token may not read that user's postings",
                    ));
                }
                self.registry.get_user(&user).await?;
                let feeds: HashSet<String> = self
                    .registry
                    .subscriptions(&user)
                    .await?
                    .into_iter()
                    .collect();
                let limit = page_limit(r.limit);
                let (page, mut next_cursor) = self
                    .ingest
                    .list_for(&feeds, &r.cursor, limit, USER_SCAN)
                    .await?;
                let mut postings: Vec<pb::FeedPosting> = Vec::with_capacity(page.len());
                let mut cursors = Vec::with_capacity(page.len());
                for (f, p, c) in page {
                    postings.push(posting(f, p));
                    cursors.push(c);
                }
                let n = fitting(&postings);
                if n < postings.len() {
                    postings.truncate(n);
                    next_cursor = cursors.swap_remove(n - 1);
                }
                return Ok(Response::new(pb::ListPostingsResponse {
                    postings,
                    next_cursor,
                }));
            }
            None => return Err(Status::invalid_argument("give a feed_id or a user_id")),
        };
        let page = self
            .ingest
            .list(&feed, &r.cursor, page_limit(r.limit))
            .await?;
        let mut postings: Vec<pb::FeedPosting> = page
            .postings
            .into_iter()
            .map(|p| posting(feed.clone(), p))
            .collect();
        let mut next_cursor = page.next_cursor;
        let n = fitting(&postings);
        if n < postings.len() {
            postings.truncate(n);
            next_cursor = page.cursors[n - 1].clone();
        }
        Ok(Response::new(pb::ListPostingsResponse {
            postings,
            next_cursor,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_bounded_in_bytes_and_always_move() {
        let p = |title: usize| {
            posting(
                "f".into(),
                PostingRecord {
                    item_id_hash: 1,
                    link: Some("javascript:alert(1)".into()),
                    title: Some("x".repeat(title)),
                    published_unix_ms: None,
                    discovered_unix_ms: 1,
                },
            )
        };
        // Stored before the ingest rules: a 1 MiB title is served clipped, a script link not
        // at all.
        let old = p(1 << 20);
        let served = old.posting.as_ref().unwrap();
        assert_eq!(served.title.len(), crate::sanitize::MAX_TITLE_BYTES);
        assert!(served.link.is_empty());
        let mut page: Vec<pb::FeedPosting> = (0..1000).map(|_| p(1 << 20)).collect();
        for f in &mut page {
            f.posting.as_mut().unwrap().link = format!("https://example.org/{}", "a".repeat(2000));
        }
        // About 3 KB each: a full page of 1,000 would be 3 MB.
        let n = fitting(&page);
        assert!((300..400).contains(&n), "{n} of 1000 postings fit");
        let big: Vec<pb::FeedPosting> = (0..10).map(|_| p(900_000)).collect();
        assert_eq!(fitting(&big), 10, "clipped, ten fit");
        assert_eq!(fitting(&[]), 0);
        assert_eq!(fitting(&page[..1]), 1);
    }
}
