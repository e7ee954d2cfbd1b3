//! A checker of histories (shared by `tests/history.rs` and the cluster soak): a client
//! that adds and removes feeds, subscribes readers and changes the budget one call at a
//! time, recording each call as acknowledged, refused (an answer that says nothing was
//! written: a standby's, a write fenced off by etcd, a request the registry turned down)
//! or unknown (no answer in time, a broken connection: it may or may not have taken
//! effect); and the check of what a leader shows against that history:
//!
//! * every acknowledged write is there, unless a later write to the same key was
//!   acknowledged or may have happened;
//! * no refused write is there, unless another call may have made it;
//! * the budget is the last acknowledged one, or one whose call is unknown.

#![allow(dead_code)]

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

#[derive(Clone, Debug)]
pub enum Op {
    AddFeed(String),
    RemoveFeed(String),
    Subscribe(String, String),
    Budget(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Acked,
    Refused(String),
    Unknown(String),
}

#[derive(Clone, Debug)]
pub struct Event {
    pub op: Op,
    pub replica: usize,
    pub outcome: Outcome,
    /// Overlapped the client's later calls (held by a paused replica): it may take effect
    /// before or after them.
    pub concurrent: bool,
}

/// What an error answer says about the write: refused when the answer guarantees nothing
/// was written, unknown otherwise.
pub fn outcome_of(e: &tonic::Status) -> Outcome {
    let msg = format!("{:?}: {}", e.code(), e.message());
    match e.code() {
        Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::FailedPrecondition
        | Code::PermissionDenied => Outcome::Refused(msg),
        Code::Unavailable
            if e.message().contains("is a standby")
                || e.message().contains("write refused: leadership") =>
        {
            Outcome::Refused(msg)
        }
        _ => Outcome::Unknown(msg),
    }
}

pub fn channel(url: &str, timeout: Duration) -> Channel {
    Endpoint::from_shared(url.to_string())
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .timeout(timeout)
        .connect_lazy()
}

/// An Admin client on `channel`, sending `token` as a bearer token when there is one.
pub fn admin(
    channel: Channel,
    token: Option<&str>,
) -> AdminClient<InterceptedService<Channel, Token>> {
    let token = token.map(|t| {
        format!("Bearer {t}")
            .parse()
            .expect("a token fits a header")
    });
    AdminClient::with_interceptor(channel, Token(token))
}

/// Adds a bearer token to every request, when there is one.
#[derive(Clone)]
pub struct Token(Option<MetadataValue<Ascii>>);

impl Interceptor for Token {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(t) = &self.0 {
            req.metadata_mut().insert("authorization", t.clone());
        }
        Ok(req)
    }
}

/// The URL a feed added by the client gets: `template` with `{id}` replaced.
pub fn feed_url(template: &str, id: &str) -> String {
    template.replace("{id}", id)
}

/// One call of `op` on `channel`; a feed it adds gets the URL `feed_url(template, id)`.
pub async fn call_on(channel: Channel, op: &Op, token: Option<&str>, template: &str) -> Outcome {
    let mut admin = admin(channel, token);
    let r = match op {
        Op::AddFeed(id) => admin
            .add_feed(pb::AddFeedRequest {
                feed_id: id.clone(),
                url: feed_url(template, id),
                weight: 1.0,
            })
            .await
            .map(drop),
        Op::RemoveFeed(id) => admin
            .remove_feed(pb::RemoveFeedRequest {
                feed_id: id.clone(),
            })
            .await
            .map(drop),
        Op::Subscribe(u, f) => admin
            .subscribe(pb::SubscribeRequest {
                user_id: u.clone(),
                feed_id: f.clone(),
            })
            .await
            .map(drop),
        Op::Budget(v) => admin
            .update_settings(pb::SettingsPatch {
                budget: Some(pb::settings_patch::Budget::FetchesPerFeedPerDay(*v)),
                ..Default::default()
            })
            .await
            .map(drop),
    };
    match r {
        Ok(()) => Outcome::Acked,
        Err(e) => outcome_of(&e),
    }
}

/// The client: calls one at a time, each to the replica that last acknowledged one, moving
/// to the next after a refusal or no answer. Its feeds are `h0001`, `h0002`, …
pub struct Client {
    /// The replicas' URLs.
    pub urls: Vec<String>,
    /// The replica called next.
    pub at: usize,
    rng: u64,
    next_feed: usize,
    added: Vec<String>,
    pairs: Vec<(String, String)>,
    next_budget: usize,
    /// Whether it changes the budget (UpdateSettings) besides the registry.
    pub budget_calls: bool,
    /// A bearer token with the admin scopes, where the replicas ask for one.
    pub token: Option<String>,
    /// The URL of the feeds it adds, `{id}` standing for the feed's id.
    pub feed_url: String,
    /// Each call and what came of it.
    pub history: Vec<Event>,
}

impl Client {
    /// A client of `urls` that may subscribe the given (user, feed) pairs, each once.
    pub fn new(urls: Vec<String>, pairs: Vec<(String, String)>, seed: u64) -> Client {
        Client {
            urls,
            at: 0,
            rng: seed,
            next_feed: 0,
            added: Vec::new(),
            pairs,
            next_budget: 0,
            budget_calls: true,
            token: None,
            feed_url: "https://{id}.example/feed.xml".to_string(),
            history: Vec::new(),
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.rng >> 33
    }

    fn next_op(&mut self) -> Op {
        loop {
            let r = self.rand() % 20;
            if r < 8 {
                self.next_feed += 1;
                let id = format!("h{:04}", self.next_feed);
                self.added.push(id.clone());
                return Op::AddFeed(id);
            } else if r < 12 && !self.added.is_empty() {
                let i = self.rand() as usize % self.added.len();
                return Op::RemoveFeed(self.added.swap_remove(i));
            } else if r < 15 && !self.pairs.is_empty() {
                let i = self.rand() as usize % self.pairs.len();
                let (u, f) = self.pairs.swap_remove(i);
                return Op::Subscribe(u, f);
            } else if r >= 15 && self.budget_calls {
                self.next_budget += 1;
                return Op::Budget(2.0 + self.next_budget as f64 / 100.0);
            }
        }
    }

    /// One call, waiting up to 2 s for its answer.
    pub async fn step(&mut self) {
        let op = self.next_op();
        let replica = self.at;
        let channel = channel(&self.urls[replica], Duration::from_secs(2));
        let outcome = call_on(channel, &op, self.token.as_deref(), &self.feed_url).await;
        if outcome != Outcome::Acked {
            self.at = (self.at + 1) % self.urls.len();
        }
        self.history.push(Event {
            op,
            replica,
            outcome,
            concurrent: false,
        });
    }
}

/// Registers readers `u0` … `u{users - 1}` at `url` (they are what the client subscribes
/// and [`shown`] reads back).
pub async fn add_readers(url: &str, token: Option<&str>, users: usize) {
    let mut admin = admin(channel(url, Duration::from_secs(10)), token);
    for u in 0..users {
        admin
            .add_user(pb::AddUserRequest {
                user_id: format!("u{u}"),
                weight: 1.0,
            })
            .await
            .unwrap_or_else(|e| panic!("add reader u{u}: {e}"));
    }
}

/// What the leader shows: feeds, each reader's subscriptions, the budget per feed.
pub struct Shown {
    /// Feeds registered (those whose ids start with the prefix asked for).
    pub feeds: BTreeSet<String>,
    /// (user, feed) subscriptions of the readers asked for.
    pub subscriptions: BTreeSet<(String, String)>,
    /// The budget, fetches per feed per day.
    pub budget: f64,
}

/// What the replica at `url` shows: its feeds whose ids start with `prefix` (all with ""),
/// the subscriptions of readers `u0` … `u{users - 1}`, and its budget.
pub async fn shown(url: &str, token: Option<&str>, prefix: &str, users: usize) -> Shown {
    let mut admin = admin(channel(url, Duration::from_secs(10)), token);
    let mut feeds = BTreeSet::new();
    let mut after = prefix.to_string();
    loop {
        let page = admin
            .list_feeds(pb::ListFeedsRequest {
                after_feed_id: after.clone(),
                limit: 500,
            })
            .await
            .expect("list feeds")
            .into_inner()
            .feeds;
        let Some(last) = page.last() else { break };
        after = last.feed_id.clone();
        let before = feeds.len();
        feeds.extend(
            page.into_iter()
                .map(|f| f.feed_id)
                .filter(|f| f.starts_with(prefix)),
        );
        if !after.starts_with(prefix) || feeds.len() == before {
            break;
        }
    }
    let mut subscriptions = BTreeSet::new();
    for u in 0..users {
        let user = format!("u{u}");
        let subs = admin
            .list_subscriptions(pb::ListSubscriptionsRequest {
                scope: Some(pb::list_subscriptions_request::Scope::UserId(user.clone())),
            })
            .await
            .expect("list subscriptions")
            .into_inner()
            .subscriptions;
        subscriptions.extend(subs.into_iter().map(|s| (s.user_id, s.feed_id)));
    }
    let budget = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .expect("get settings")
        .into_inner()
        .budget_fetches_per_feed_per_day;
    Shown {
        feeds,
        subscriptions,
        budget,
    }
}

/// Checks what is shown against the history; returns the violations found.
pub fn check(history: &[Event], shown: &Shown, initial_budget: f64) -> Vec<String> {
    let mut bad = Vec::new();
    // Per feed: (acked add, unknown add, acked remove, unknown remove, refused add).
    let mut feeds: BTreeMap<&str, [bool; 5]> = BTreeMap::new();
    let mut pairs: BTreeMap<(&str, &str), &Outcome> = BTreeMap::new();
    let mut budget_ok: Vec<f64> = vec![initial_budget];
    for e in history {
        match (&e.op, &e.outcome) {
            (Op::AddFeed(f), o) => {
                let s = feeds.entry(f).or_default();
                match o {
                    Outcome::Acked => s[0] = true,
                    Outcome::Unknown(_) => s[1] = true,
                    Outcome::Refused(_) => s[4] = true,
                }
            }
            (Op::RemoveFeed(f), o) => {
                let s = feeds.entry(f).or_default();
                match o {
                    Outcome::Acked => s[2] = true,
                    Outcome::Unknown(_) => s[3] = true,
                    Outcome::Refused(_) => {}
                }
            }
            (Op::Subscribe(u, f), o) => {
                pairs.insert((u, f), o);
            }
            (Op::Budget(v), Outcome::Acked) if !e.concurrent => budget_ok = vec![*v],
            (Op::Budget(_), _) => {}
        }
    }
    // Calls without an answer, and those that overlapped later ones, may land after the
    // last acknowledged one.
    budget_ok.extend(history.iter().filter_map(|e| match (&e.op, &e.outcome) {
        (Op::Budget(v), Outcome::Unknown(_)) => Some(*v),
        (Op::Budget(v), Outcome::Acked) if e.concurrent => Some(*v),
        _ => None,
    }));
    for (f, [acked, unknown, removed, remove_unknown, refused]) in &feeds {
        let present = shown.feeds.contains(*f);
        // Each id is added once and removed at most once: the add comes first.
        let may_be_present = (*acked && !*removed) || *unknown;
        let may_be_absent = !*acked || *removed || *remove_unknown;
        if present && !may_be_present {
            bad.push(format!(
                "feed {f} is registered: add acked {acked}, unknown {unknown}, refused {refused}; removal acked {removed}"
            ));
        }
        if !present && !may_be_absent {
            bad.push(format!("feed {f}: its acknowledged add is lost"));
        }
    }
    for ((u, f), o) in &pairs {
        let present = shown
            .subscriptions
            .contains(&(u.to_string(), f.to_string()));
        match o {
            Outcome::Acked if !present => {
                bad.push(format!("subscription {u} → {f}: acknowledged, lost"))
            }
            Outcome::Refused(why) if present => bad.push(format!(
                "subscription {u} → {f}: refused ({why}), yet present"
            )),
            _ => {}
        }
    }
    if !budget_ok.iter().any(|b| (b - shown.budget).abs() < 1e-9) {
        bad.push(format!(
            "budget {} per feed: the last acknowledged or an unknown one was wanted ({budget_ok:?})",
            shown.budget
        ));
    }
    bad
}
