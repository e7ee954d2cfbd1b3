//! Typed keys. Every key is `kind/` followed by its parts joined with `/`; parts may not
//! contain `/` or NUL, so kinds never overlap and a prefix scan returns exactly one kind.

/// A storage key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key<'a> {
    /// A feed's registry entry.
    Feed(&'a str),
    /// The URL index: the id of the feed registered under the normalized URL whose xxh3
    /// hash this is, so one URL is fetched for one feed however it was added.
    FeedUrl(u64),
    /// A user's registry entry.
    User(&'a str),
    /// A subscription, indexed by user then feed.
    SubscriptionByUser(&'a str, &'a str),
    /// The same subscription, indexed by feed then user.
    SubscriptionByFeed(&'a str, &'a str),
    /// The cluster settings.
    Settings,
    /// A feed's learned histograms.
    Learned(&'a str),
    /// An item already ingested for a feed: the idempotency marker of stores written before
    /// the per-feed ingest record ([`Key::Seen`]); read and expired, never written.
    Item(&'a str, u64),
    /// A feed's ingest record: its next posting number and the items ingested lately
    /// (`crate::ingest::records`).
    Seen(&'a str),
    /// A posting in a feed's discovery order (`seq` is the feed's posting sequence number).
    Posting(&'a str, u64),
    /// The next posting sequence number of a feed, in stores written before
    /// [`Key::Seen`] took it over; read once per feed, then deleted.
    PostingSeq(&'a str),
    /// A posting in global discovery order (value: feed id and the feed's sequence number),
    /// the index postings-by-user pages through.
    Discovery(u64),
    /// The next global discovery number.
    DiscoverySeq,
    /// The key a recovering store writes to prove it takes writes again.
    Probe,
    /// An operator's fetch limit for one host.
    HostLimit(&'a str),
    /// A user's reader access histograms.
    Access(&'a str),
    /// Since when the access histograms have been collected (their exposure).
    AccessSince,
    /// Set once the access histograms written before feed numbers were unique have been
    /// repaired ([`crate::hub`]'s open).
    AccessRepaired,
    /// Which stored plan is whole: its generation, chunk count and budget.
    PlanMeta,
    /// The workers of the leader's term (names and capacities), awaited by the next leader
    /// before it deals their hosts.
    Members,
    /// One chunk of the stored plan of a generation (feeds in id order).
    PlanChunk(u64, u32),
    /// A feed's WebSub subscription (its callback id and secret included).
    Push(&'a str),
    /// Every WebSub hub's measured reliability.
    PushHubs,
}

/// A key part that would break the layout.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("id `{0}` is empty or contains `/` or NUL")]
pub struct BadId(pub String);

fn check(id: &str) -> Result<&str, BadId> {
    if id.is_empty() || id.contains('/') || id.contains('\0') {
        Err(BadId(id.to_string()))
    } else {
        Ok(id)
    }
}

impl Key<'_> {
    /// The encoded key.
    pub fn encode(&self) -> Result<Vec<u8>, BadId> {
        Ok(match *self {
            Key::Feed(f) => format!("feed/{}", check(f)?),
            Key::FeedUrl(h) => format!("furl/{h:016x}"),
            Key::User(u) => format!("user/{}", check(u)?),
            Key::SubscriptionByUser(u, f) => format!("sub-u/{}/{}", check(u)?, check(f)?),
            Key::SubscriptionByFeed(f, u) => format!("sub-f/{}/{}", check(f)?, check(u)?),
            Key::Settings => "settings".to_string(),
            Key::Learned(f) => format!("learned/{}", check(f)?),
            // Fixed-width hex keeps numeric order equal to byte order.
            Key::Item(f, id) => format!("item/{}/{id:016x}", check(f)?),
            Key::Posting(f, seq) => format!("post/{}/{seq:016x}", check(f)?),
            Key::PostingSeq(f) => format!("postseq/{}", check(f)?),
            Key::Seen(f) => format!("seen/{}", check(f)?),
            Key::Discovery(n) => format!("disc/{n:016x}"),
            Key::DiscoverySeq => "discseq".to_string(),
            Key::Probe => "probe".to_string(),
            Key::HostLimit(h) => format!("hostlimit/{}", check(h)?),
            Key::Access(u) => format!("access/{}", check(u)?),
            Key::AccessSince => "accesssince".to_string(),
            Key::AccessRepaired => "accessrepaired".to_string(),
            Key::Members => "members".to_string(),
            Key::PlanMeta => "planmeta".to_string(),
            Key::PlanChunk(g, i) => format!("plan/{g:016x}/{i:08x}"),
            Key::Push(f) => format!("push/{}", check(f)?),
            Key::PushHubs => "pushhubs".to_string(),
        }
        .into_bytes())
    }

    /// The prefix of every key of this kind, whatever its parts (`sub-f/` for every
    /// subscription by feed): for scans of a whole index.
    pub fn prefix_of_kind(&self) -> Vec<u8> {
        let kind = match *self {
            Key::Feed(_) => "feed/",
            Key::FeedUrl(_) => "furl/",
            Key::User(_) => "user/",
            Key::SubscriptionByUser(..) => "sub-u/",
            Key::SubscriptionByFeed(..) => "sub-f/",
            Key::Settings => "settings",
            Key::Learned(_) => "learned/",
            Key::Item(..) => "item/",
            Key::Posting(..) => "post/",
            Key::PostingSeq(_) => "postseq/",
            Key::Seen(_) => "seen/",
            Key::Discovery(_) => "disc/",
            Key::DiscoverySeq => "discseq",
            Key::Probe => "probe",
            Key::HostLimit(_) => "hostlimit/",
            Key::Access(_) => "access/",
            Key::AccessSince => "accesssince",
            Key::AccessRepaired => "accessrepaired",
            Key::Members => "members",
            Key::PlanMeta => "planmeta",
            Key::PlanChunk(..) => "plan/",
            Key::Push(_) => "push/",
            Key::PushHubs => "pushhubs",
        };
        kind.as_bytes().to_vec()
    }

    /// The prefix of every key of this kind (for `Feed`, `User`, `Learned`), or of every key
    /// under the first part (subscriptions, items, postings of one user or feed).
    pub fn prefix(&self) -> Result<Vec<u8>, BadId> {
        Ok(match *self {
            Key::Feed(_) => b"feed/".to_vec(),
            Key::FeedUrl(_) => b"furl/".to_vec(),
            Key::User(_) => b"user/".to_vec(),
            Key::Learned(_) => b"learned/".to_vec(),
            Key::Settings => b"settings".to_vec(),
            Key::SubscriptionByUser(u, _) => format!("sub-u/{}/", check(u)?).into_bytes(),
            Key::SubscriptionByFeed(f, _) => format!("sub-f/{}/", check(f)?).into_bytes(),
            Key::Item(f, _) => format!("item/{}/", check(f)?).into_bytes(),
            Key::Posting(f, _) => format!("post/{}/", check(f)?).into_bytes(),
            Key::PostingSeq(_) => b"postseq/".to_vec(),
            Key::Seen(_) => b"seen/".to_vec(),
            Key::Discovery(_) => b"disc/".to_vec(),
            Key::DiscoverySeq => b"discseq".to_vec(),
            Key::Probe => b"probe".to_vec(),
            Key::HostLimit(_) => b"hostlimit/".to_vec(),
            Key::Access(_) => b"access/".to_vec(),
            Key::AccessSince => b"accesssince".to_vec(),
            Key::AccessRepaired => b"accessrepaired".to_vec(),
            Key::Members => b"members".to_vec(),
            Key::PlanMeta => b"planmeta".to_vec(),
            Key::PlanChunk(g, _) => format!("plan/{g:016x}/").into_bytes(),
            Key::Push(_) => b"push/".to_vec(),
            Key::PushHubs => b"pushhubs".to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_disjoint_and_ordered() {
        assert_eq!(Key::Feed("a").encode().unwrap(), b"feed/a");
        assert!(Key::Feed("a/b").encode().is_err());
        assert!(Key::User("").encode().is_err());
        let p2 = Key::Posting("f", 2).encode().unwrap();
        let p10 = Key::Posting("f", 10).encode().unwrap();
        assert!(p2 < p10, "numeric order is byte order");
        let prefix = Key::Posting("f", 0).prefix().unwrap();
        assert!(p10.starts_with(&Key::Posting("g", 0).prefix_of_kind()));
        assert!(Key::SubscriptionByFeed("f", "u")
            .encode()
            .unwrap()
            .starts_with(&Key::SubscriptionByFeed("", "").prefix_of_kind()));
        assert!(p10.starts_with(&prefix));
        assert!(
            !Key::Posting("ff", 1).encode().unwrap().starts_with(&prefix),
            "feed f does not cover feed ff"
        );
    }
}
