//! Feeds, users and subscriptions: validated operations over the store.
//!
//! Every bad request gets a [`RegistryError`] that says which argument is wrong and maps
//! one-to-one onto a gRPC status (invalid argument, not found, already exists), and a
//! failed request changes nothing.

use crate::store::keys::{BadId, Key};
use crate::store::{Compare, KvBackend, Op, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

mod url_check;
mod url_index;
pub use url_check::{check_target, check_url};
use url_index::url_key;
pub use url_index::UrlIndexReport;

/// Keys one range read of a whole index asks for.
const SCAN_PAGE: usize = 2_000;

/// A registered feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeedRecord {
    /// Feed id.
    pub id: String,
    /// Fetch URL (http or https).
    pub url: String,
    /// Politeness group: the URL's host and port.
    pub host: String,
    /// Importance weight.
    pub weight: f64,
}

/// A registered user.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserRecord {
    /// User id.
    pub id: String,
    /// Weight of the user's accesses.
    pub weight: f64,
}

/// Why a registry request was refused.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The request is malformed (maps to `INVALID_ARGUMENT`).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A referenced id does not exist (`NOT_FOUND`).
    #[error("not found: {0}")]
    NotFound(String),
    /// The thing to create exists already (`ALREADY_EXISTS`).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The store failed (`UNAVAILABLE`).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<BadId> for RegistryError {
    fn from(e: BadId) -> Self {
        RegistryError::InvalidArgument(e.to_string())
    }
}

/// Outcome of an OPML import.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpmlImport {
    /// Feeds newly added.
    pub feeds_added: u32,
    /// Ids of the feeds newly added.
    pub added_ids: Vec<String>,
    /// Feeds whose URL was already registered.
    pub feeds_already_present: u32,
    /// Subscriptions added for the importing user.
    pub subscriptions_added: u32,
    /// Outlines skipped, with the reason.
    pub skipped: Vec<String>,
}

/// The registry over a store backend.
pub struct Registry<B> {
    store: Arc<B>,
    /// Networks a feed URL's IP literal may name besides public addresses
    /// ([`check_target`]); empty by default.
    private_allowed: Arc<[ipnet::IpNet]>,
}

/// Largest feed or user weight: weights scale costs, and one astronomically weighted feed
/// or reader would overflow them or take the whole budget.
pub const MAX_WEIGHT: f64 = 1e6;
/// Longest feed URL accepted, in bytes (every assignment carries it).
pub const MAX_URL_BYTES: usize = 4096;
/// Longest feed or user id a registration accepts, in bytes. Every assignment, report,
/// posting key and admin page carries ids, so one registry of multi-megabyte ids would make
/// a `ListFeeds` or `ListFeedHistory` page outgrow what a client accepts; generated ids
/// are 16 bytes. Records stored before the cap still load.
pub const MAX_ID_BYTES: usize = 256;

/// `id` for a new record of `kind` ("feed", "user"): refused past [`MAX_ID_BYTES`], with
/// a message that names the length and a prefix, not the whole id.
fn new_id<'a>(kind: &str, id: &'a str) -> Result<&'a str, RegistryError> {
    if id.len() > MAX_ID_BYTES {
        return Err(RegistryError::InvalidArgument(format!(
            "{kind} id of {} bytes (`{}…`) is longer than {MAX_ID_BYTES}",
            id.len(),
            kairos_proto::bounds::prefix(id, 32)
        )));
    }
    Ok(id)
}

fn weight(w: f64) -> Result<f64, RegistryError> {
    if !w.is_finite() || !(0.0..=MAX_WEIGHT).contains(&w) {
        return Err(RegistryError::InvalidArgument(format!(
            "weight {w} must be a number from 0 to {MAX_WEIGHT}"
        )));
    }
    Ok(if w == 0.0 { 1.0 } else { w })
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("registry records serialize")
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, RegistryError> {
    serde_json::from_slice(bytes)
        .map_err(|e| RegistryError::Store(StoreError(format!("corrupt record: {e}"))))
}

/// Deepest element nesting an OPML import accepts (real ones nest folders a few levels).
pub const MAX_OPML_DEPTH: usize = 64;
/// Outlines one OPML import accepts: a bigger list is split by the caller, so one import
/// cannot hold the registry for minutes.
pub const MAX_OPML_OUTLINES: usize = 10_000;

/// Checks an OPML document's nesting and size with a streaming (non-recursive) pass before
/// the tree parser sees it: a few thousand nested outlines would overflow the tree parser's
/// stack and abort the process.
fn check_opml_shape(opml: &str) -> Result<(), RegistryError> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(opml);
    reader.config_mut().check_end_names = false;
    let (mut depth, mut outlines) = (0usize, 0usize);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                depth += 1;
                if depth > MAX_OPML_DEPTH {
                    return Err(RegistryError::InvalidArgument(format!(
                        "OPML nests deeper than {MAX_OPML_DEPTH} levels"
                    )));
                }
                outlines += usize::from(e.local_name().as_ref() == b"outline");
            }
            Ok(Event::Empty(e)) => outlines += usize::from(e.local_name().as_ref() == b"outline"),
            Ok(Event::End(_)) => depth = depth.saturating_sub(1),
            Ok(Event::Eof) => break,
            // The tree parser reports the syntax error with its position.
            Err(_) => break,
            Ok(_) => {}
        }
        if outlines > MAX_OPML_OUTLINES {
            return Err(RegistryError::InvalidArgument(format!(
                "OPML has more than {MAX_OPML_OUTLINES} outlines; import it in parts"
            )));
        }
    }
    Ok(())
}

impl<B: KvBackend> Registry<B> {
    /// A registry over `store`.
    pub fn new(store: Arc<B>) -> Self {
        Registry {
            store,
            private_allowed: Arc::from(Vec::new()),
        }
    }

    /// The same registry, permitting feed URLs whose IP literal is in `allowed` (`serve
    /// --allow-private`; the demo's loopback farm).
    pub fn with_private_allowed(mut self, allowed: Vec<ipnet::IpNet>) -> Self {
        self.private_allowed = Arc::from(allowed);
        self
    }

    /// Adds a feed; `id` defaults to a hash of the normalized URL. A URL already registered
    /// under another id is refused with that id: two feeds on one URL would fetch it twice.
    pub async fn add_feed(
        &self,
        id: Option<&str>,
        url: &str,
        w: f64,
    ) -> Result<FeedRecord, RegistryError> {
        let (url, host) = check_url(url)?;
        check_target(&url, &self.private_allowed)?;
        let id = match id.filter(|s| !s.is_empty()) {
            Some(id) => new_id("feed", id)?.to_string(),
            None => format!("{:016x}", xxh3_64(url.as_bytes())),
        };
        let rec = FeedRecord {
            id,
            url,
            host,
            weight: weight(w)?,
        };
        let feed_key = Key::Feed(&rec.id).encode()?;
        let index_key = url_key(&rec.url)?;
        let (index_now, owner) = self.index_entry(&rec.url).await?;
        if let Some(owner) = owner {
            return Err(RegistryError::AlreadyExists(if owner.id == rec.id {
                format!("feed `{}`", rec.id)
            } else {
                format!("url {} is registered as feed `{}`", rec.url, owner.id)
            }));
        }
        let done = self
            .store
            .txn(
                vec![
                    Compare::Value(feed_key.clone(), None),
                    Compare::Value(index_key.clone(), index_now),
                ],
                vec![
                    Op::Put(feed_key, json(&rec)),
                    Op::Put(index_key, rec.id.clone().into_bytes()),
                ],
            )
            .await?;
        if !done {
            // The id is taken, or the URL was registered since the look-up above.
            return Err(RegistryError::AlreadyExists(format!("feed `{}`", rec.id)));
        }
        Ok(rec)
    }

    /// One feed.
    pub async fn get_feed(&self, id: &str) -> Result<FeedRecord, RegistryError> {
        match self.store.get(Key::Feed(id).encode()?).await? {
            Some(b) => decode(&b),
            None => Err(RegistryError::NotFound(format!("feed `{id}`"))),
        }
    }

    /// Points an existing feed at a new URL (a feed that moved), keeping its id, weight,
    /// subscriptions, postings and learned state. A URL registered to another feed is
    /// refused with that feed's id (merge onto it instead).
    pub async fn set_feed_url(&self, id: &str, url: &str) -> Result<FeedRecord, RegistryError> {
        let mut rec = self.get_feed(id).await?;
        let (url, host) = check_url(url)?;
        check_target(&url, &self.private_allowed)?;
        if url == rec.url {
            return Ok(rec);
        }
        let (new_now, other) = self.index_entry(&url).await?;
        if let Some(other) = other {
            return Err(RegistryError::AlreadyExists(format!(
                "url {url} is registered as feed `{}`",
                other.id
            )));
        }
        let (old_key, new_key) = (url_key(&rec.url)?, url_key(&url)?);
        let mut ops = Vec::new();
        if self.store.get(old_key.clone()).await?.as_deref() == Some(id.as_bytes()) {
            ops.push(Op::Delete(old_key));
        }
        rec.url = url;
        rec.host = host;
        ops.push(Op::Put(Key::Feed(id).encode()?, json(&rec)));
        ops.push(Op::Put(new_key.clone(), id.as_bytes().to_vec()));
        if !self
            .store
            .txn(vec![Compare::Value(new_key, new_now)], ops)
            .await?
        {
            return Err(RegistryError::AlreadyExists(format!(
                "url {} was registered meanwhile",
                rec.url
            )));
        }
        Ok(rec)
    }

    /// Removes a feed, every subscription to it and its learned state.
    pub async fn remove_feed(&self, id: &str) -> Result<(), RegistryError> {
        let rec = self.get_feed(id).await?;
        // Its learned state goes in the same batch: nothing else ever deletes it, and a
        // feed registered again under the id is another feed until it shows otherwise.
        let mut ops = vec![
            Op::Delete(Key::Feed(id).encode()?),
            Op::Delete(Key::Learned(id).encode()?),
        ];
        let index_key = url_key(&rec.url)?;
        if self.store.get(index_key.clone()).await?.as_deref() == Some(id.as_bytes()) {
            ops.push(Op::Delete(index_key));
        }
        for user in self.subscribers(id).await? {
            ops.push(Op::Delete(Key::SubscriptionByUser(&user, id).encode()?));
            ops.push(Op::Delete(Key::SubscriptionByFeed(id, &user).encode()?));
        }
        Ok(self.store.batch(ops).await?)
    }

    /// Feeds in id order after `after`.
    pub async fn list_feeds(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FeedRecord>, RegistryError> {
        let after = after.map(|a| Key::Feed(a).encode()).transpose()?;
        let rows = self
            .store
            .range(Key::Feed("").prefix()?, after, limit)
            .await?;
        rows.iter().map(|(_, v)| decode(v)).collect()
    }

    /// Adds a user.
    pub async fn add_user(&self, id: &str, w: f64) -> Result<UserRecord, RegistryError> {
        new_id("user", id)?;
        let rec = UserRecord {
            id: id.to_string(),
            weight: weight(w)?,
        };
        if !self
            .store
            .put_if_absent(Key::User(id).encode()?, json(&rec))
            .await?
        {
            return Err(RegistryError::AlreadyExists(format!("user `{id}`")));
        }
        Ok(rec)
    }

    /// One user.
    pub async fn get_user(&self, id: &str) -> Result<UserRecord, RegistryError> {
        match self.store.get(Key::User(id).encode()?).await? {
            Some(b) => decode(&b),
            None => Err(RegistryError::NotFound(format!("user `{id}`"))),
        }
    }

    /// Every feed, read page by page.
    pub async fn all_feeds(&self) -> Result<Vec<FeedRecord>, RegistryError> {
        let mut out: Vec<FeedRecord> = Vec::new();
        loop {
            let page = self
                .list_feeds(out.last().map(|f| f.id.as_str()), 1000)
                .await?;
            if page.is_empty() {
                return Ok(out);
            }
            out.extend(page);
        }
    }

    /// Every user, read page by page.
    pub async fn all_users(&self) -> Result<Vec<UserRecord>, RegistryError> {
        let mut out: Vec<UserRecord> = Vec::new();
        loop {
            let page = self
                .list_users(out.last().map(|u| u.id.as_str()), 1000)
                .await?;
            if page.is_empty() {
                return Ok(out);
            }
            out.extend(page);
        }
    }

    /// Users in id order after `after`.
    pub async fn list_users(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<UserRecord>, RegistryError> {
        let after = after.map(|a| Key::User(a).encode()).transpose()?;
        let rows = self
            .store
            .range(Key::User("").prefix()?, after, limit)
            .await?;
        rows.iter().map(|(_, v)| decode(v)).collect()
    }

    /// Removes a user, their subscriptions and their access histograms.
    pub async fn remove_user(&self, id: &str) -> Result<(), RegistryError> {
        self.get_user(id).await?;
        // The reader's access histograms go in the same batch (nothing else deletes them).
        let mut ops = vec![
            Op::Delete(Key::User(id).encode()?),
            Op::Delete(Key::Access(id).encode()?),
        ];
        for feed in self.subscriptions(id).await? {
            ops.push(Op::Delete(Key::SubscriptionByUser(id, &feed).encode()?));
            ops.push(Op::Delete(Key::SubscriptionByFeed(&feed, id).encode()?));
        }
        Ok(self.store.batch(ops).await?)
    }

    /// Subscribes a user to a feed.
    pub async fn subscribe(&self, user: &str, feed: &str) -> Result<(), RegistryError> {
        self.get_user(user).await?;
        self.get_feed(feed).await?;
        let by_user = Key::SubscriptionByUser(user, feed).encode()?;
        if self.store.get(by_user.clone()).await?.is_some() {
            return Err(RegistryError::AlreadyExists(format!(
                "subscription of `{user}` to `{feed}`"
            )));
        }
        let ops = vec![
            Op::Put(by_user, Vec::new()),
            Op::Put(Key::SubscriptionByFeed(feed, user).encode()?, Vec::new()),
        ];
        Ok(self.store.batch(ops).await?)
    }

    /// Removes a subscription.
    pub async fn unsubscribe(&self, user: &str, feed: &str) -> Result<(), RegistryError> {
        let by_user = Key::SubscriptionByUser(user, feed).encode()?;
        if self.store.get(by_user.clone()).await?.is_none() {
            return Err(RegistryError::NotFound(format!(
                "subscription of `{user}` to `{feed}`"
            )));
        }
        Ok(self
            .store
            .batch(vec![
                Op::Delete(by_user),
                Op::Delete(Key::SubscriptionByFeed(feed, user).encode()?),
            ])
            .await?)
    }

    /// Feed ids a user subscribes to.
    pub async fn subscriptions(&self, user: &str) -> Result<Vec<String>, RegistryError> {
        self.second_parts(Key::SubscriptionByUser(user, "").prefix()?)
            .await
    }

    /// User ids subscribed to a feed.
    pub async fn subscribers(&self, feed: &str) -> Result<Vec<String>, RegistryError> {
        self.second_parts(Key::SubscriptionByFeed(feed, "").prefix()?)
            .await
    }

    /// Every feed's subscribers, in one scan of the by-feed index (a few hundred range
    /// reads for a million subscriptions, where asking feed by feed took one or two reads
    /// per feed: at 100,000 feeds on etcd that alone was over a minute of every round).
    /// Feeds nobody reads are absent.
    pub async fn all_subscribers(&self) -> Result<HashMap<String, Vec<String>>, RegistryError> {
        let prefix = Key::SubscriptionByFeed("", "").prefix_of_kind();
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        let mut after = None;
        loop {
            let page = self.store.range(prefix.clone(), after, SCAN_PAGE).await?;
            let full = page.len() == SCAN_PAGE;
            after = page.last().map(|(k, _)| k.clone());
            for (k, _) in &page {
                let rest = String::from_utf8_lossy(&k[prefix.len()..]);
                // Keys are `sub-f/<feed>/<user>` and ids hold no `/`.
                if let Some((feed, user)) = rest.split_once('/') {
                    out.entry(feed.to_string())
                        .or_default()
                        .push(user.to_string());
                }
            }
            if !full {
                return Ok(out);
            }
        }
    }

    async fn second_parts(&self, prefix: Vec<u8>) -> Result<Vec<String>, RegistryError> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .store
                .range(prefix.clone(), after.clone(), 1000)
                .await?;
            let full = page.len() == 1000;
            let Some(last) = page.last() else { break };
            after = Some(last.0.clone());
            out.extend(
                page.iter()
                    .map(|(k, _)| String::from_utf8_lossy(&k[prefix.len()..]).into_owned()),
            );
            // A page short of the limit is the last: no empty read to prove it.
            if !full {
                break;
            }
        }
        Ok(out)
    }

    /// Imports the feed outlines (`xmlUrl`) of an OPML document; with `user`, subscribes
    /// them. A document with no usable outline is an error; bad outlines are skipped with a
    /// reason.
    pub async fn import_opml(
        &self,
        opml: &str,
        user: Option<&str>,
    ) -> Result<OpmlImport, RegistryError> {
        check_opml_shape(opml)?;
        let doc = roxmltree::Document::parse(opml)
            .map_err(|e| RegistryError::InvalidArgument(format!("OPML does not parse: {e}")))?;
        if doc.root_element().tag_name().name() != "opml" {
            return Err(RegistryError::InvalidArgument(
                "document is not OPML (root element is not <opml>)".into(),
            ));
        }
        if let Some(u) = user {
            self.get_user(u).await?;
        }
        let urls: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("outline"))
            .filter_map(|n| n.attribute("xmlUrl").map(str::to_string))
            .collect();
        if urls.is_empty() {
            return Err(RegistryError::InvalidArgument(
                "OPML has no outline with an xmlUrl".into(),
            ));
        }
        // Checked and looked up first, then written in one atomic batch: an import that is
        // interrupted (a crash, a full disk) leaves nothing half done.
        let mut out = OpmlImport::default();
        let mut feeds: Vec<FeedRecord> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for raw in urls {
            match check_url(&raw).and_then(|(url, host)| {
                check_target(&url, &self.private_allowed)?;
                Ok((url, host))
            }) {
                Ok((url, host)) => {
                    let id = format!("{:016x}", xxh3_64(url.as_bytes()));
                    if seen.insert(id.clone()) {
                        feeds.push(FeedRecord {
                            id,
                            url,
                            host,
                            weight: 1.0,
                        });
                    }
                }
                Err(RegistryError::InvalidArgument(why)) => out.skipped.push(why),
                Err(e) => return Err(e),
            }
        }
        // A URL registered under another id (added by hand with its own id, or moved
        // there by a redirect) keeps that feed: the import subscribes to it.
        let index = self
            .store
            .get_many(
                feeds
                    .iter()
                    .map(|f| url_key(&f.url))
                    .collect::<Result<Vec<_>, _>>()?,
            )
            .await?;
        let owners: Vec<Option<String>> = index
            .into_iter()
            .map(|o| o.map(|o| String::from_utf8_lossy(&o).into_owned()))
            .collect();
        let owner_records = self
            .store
            .get_many(
                owners
                    .iter()
                    .map(|o| Key::Feed(o.as_deref().unwrap_or("-")).encode())
                    .collect::<Result<Vec<_>, _>>()?,
            )
            .await?;
        for ((f, owner), rec) in feeds.iter_mut().zip(&owners).zip(owner_records) {
            if let (Some(owner), Some(rec)) = (owner, rec) {
                if decode::<FeedRecord>(&rec)?.url == f.url {
                    f.id = owner.clone();
                }
            }
        }
        let mut keys = Vec::with_capacity(feeds.len() * 2);
        for f in &feeds {
            keys.push(Key::Feed(&f.id).encode()?);
            keys.push(match user {
                Some(u) => Key::SubscriptionByUser(u, &f.id).encode()?,
                None => Key::Feed(&f.id).encode()?,
            });
        }
        let present = self.store.get_many(keys).await?;
        let mut ops = Vec::new();
        for (f, found) in feeds.iter().zip(present.chunks(2)) {
            if found[0].is_some() {
                out.feeds_already_present += 1;
            } else {
                ops.push(Op::Put(Key::Feed(&f.id).encode()?, json(f)));
                ops.push(Op::Put(url_key(&f.url)?, f.id.clone().into_bytes()));
                out.feeds_added += 1;
                out.added_ids.push(f.id.clone());
            }
            if let Some(u) = user {
                if found[1].is_none() {
                    ops.push(Op::Put(
                        Key::SubscriptionByUser(u, &f.id).encode()?,
                        Vec::new(),
                    ));
                    ops.push(Op::Put(
                        Key::SubscriptionByFeed(&f.id, u).encode()?,
                        Vec::new(),
                    ));
                    out.subscriptions_added += 1;
                }
            }
        }
        if !ops.is_empty() {
            self.store.batch(ops).await?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
