//! Who may call what: bearer tokens with scopes, checked in front of every gRPC service —
//! the coordinator's listeners and the worker's public ingest endpoint.
//!
//! A token file lists the callers, one per line (`#` starts a comment):
//!
//! ```text
//! # name      scopes                    token
//! ops         admin:read,admin:write    9c1f…(at least 24 characters)
//! dashboard   admin:read                4be0…
//! reader-app  ingest,postings           77aa…
//! alice-app   postings,user:alice       5e71…
//! tenant-b    ingest,postings,user:b-*  0f3d…
//! worker-0    worker                    d2c4…
//! ```
//!
//! Scopes: `admin:read` (List*/Get*/Inspect*/GetStats/ListWorkers and server reflection),
//! `admin:write` (every other Admin call), `ingest` (reader access events), `postings`
//! (reading postings), `worker` (WorkerControl; the line's name is the only worker name that
//! token may register, and its sessions are the only ones it may use; a name ending in `*`,
//! such as `kairos-worker-*`, admits every worker name with that prefix, for a Deployment
//! whose pods share one token). Health checks are open, so probes need no credentials.
//!
//! Reader tokens (`ingest`, `postings`) act for **every** user unless the line binds them:
//! `user:ID` (one user; repeat it for a list) or `user:PREFIX*` (an app's users, all with
//! that prefix). A bound token reads postings by user only, of its own users, and sends
//! accesses only for them. A user outside the binding gets the same answer whether or not
//! the user exists (`PERMISSION_DENIED` for postings; counted with unknown users for
//! accesses), so a bound token cannot learn which user ids exist.
//!
//! A call without a valid token gets `UNAUTHENTICATED`; a valid token without the scope
//! gets `PERMISSION_DENIED`; neither reaches the service, so nothing changes. Tokens are
//! compared in constant time. The file is watched: when its contents change (compared
//! byte for byte, not by size or modification time) it is read again, and a file that no longer parses keeps the previous tokens (the
//! error is logged once per change and counted in `kairos_auth_reload_failures_total`).

use std::collections::HashSet;

/// Counter `reason`: calls refused (unauthenticated, permission_denied).
pub const AUTH_REFUSALS_TOTAL: &str = "kairos_auth_refusals_total";
/// Counter: token file changes that did not parse (the previous tokens stayed in force).
pub const AUTH_RELOAD_FAILURES_TOTAL: &str = "kairos_auth_reload_failures_total";
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::Status;

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Admin reads and server reflection.
    AdminRead,
    /// Admin writes.
    AdminWrite,
    /// Reader access events.
    Ingest,
    /// Reading postings.
    Postings,
    /// The worker control protocol, under the token's own name.
    Worker,
}

impl Scope {
    fn parse(s: &str) -> Option<Scope> {
        Some(match s {
            "admin:read" => Scope::AdminRead,
            "admin:write" => Scope::AdminWrite,
            "ingest" => Scope::Ingest,
            "postings" => Scope::Postings,
            "worker" => Scope::Worker,
            _ => return None,
        })
    }

    /// What a gRPC method needs.
    pub fn for_path(path: &str) -> Need {
        let mut parts = path.trim_start_matches('/').splitn(2, '/');
        let (service, method) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        Need::Scope(match service {
            "grpc.health.v1.Health" => return Need::Nothing,
            "grpc.reflection.v1.ServerReflection" | "grpc.reflection.v1alpha.ServerReflection" => {
                Scope::AdminRead
            }
            "kairos.v1.Admin" => {
                let read = method.starts_with("List")
                    || method.starts_with("Get")
                    || method.starts_with("Inspect");
                if read {
                    Scope::AdminRead
                } else {
                    Scope::AdminWrite
                }
            }
            "kairos.v1.Ingest" => Scope::Ingest,
            "kairos.v1.Postings" => Scope::Postings,
            "kairos.v1.WorkerControl" => Scope::Worker,
            _ => return Need::Unknown,
        })
    }
}

/// What a call needs to pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Open to all (health checks).
    Nothing,
    /// A token with this scope.
    Scope(Scope),
    /// A method no scope covers: refused.
    Unknown,
}

/// The caller a request was authenticated as; attached to the request's extensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The name on the token's line (a worker's name, for `worker` tokens).
    pub name: String,
    scopes: HashSet<Scope>,
    /// The users a reader token may act for (`user:` entries); `None`: every user.
    users: Option<Vec<String>>,
}

impl Identity {
    /// Whether the token carries `scope`.
    pub fn has(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// Whether the token may act for `user_id` (read their postings, send their accesses):
    /// always for a token without `user:` entries, else when an entry names the user or is
    /// a prefix (`user:PREFIX*`) of the id.
    pub fn may_act_for(&self, user_id: &str) -> bool {
        match &self.users {
            None => true,
            Some(users) => users.iter().any(|u| match u.strip_suffix('*') {
                Some(prefix) => user_id.starts_with(prefix),
                None => u == user_id,
            }),
        }
    }

    /// Whether the token is bound to some users (so may not read postings by feed).
    pub fn bound_to_users(&self) -> bool {
        self.users.is_some()
    }

    /// Whether a `worker` token may act as the worker named `worker_name`: its own name,
    /// or, for a name ending in `*` (one token shared by a Deployment's pods), any name
    /// with that prefix.
    pub fn may_act_as(&self, worker_name: &str) -> bool {
        match self.name.strip_suffix('*') {
            Some(prefix) => worker_name.starts_with(prefix) && worker_name.len() > prefix.len(),
            None => worker_name == self.name,
        }
    }
}

/// Shortest token accepted: long enough that guessing is hopeless.
pub const MIN_TOKEN_LEN: usize = 24;

/// A parsed token file.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Identity)>,
}

impl Tokens {
    /// Parses a token file's text; the error names the line.
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let mut entries: Vec<(Vec<u8>, Identity)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, scopes, token] = fields[..] else {
                return Err(format!(
                    "line {}: expected `name scopes token`, found {} fields",
                    i + 1,
                    fields.len()
                ));
            };
            let mut users: Option<Vec<String>> = None;
            let mut granted = HashSet::new();
            for entry in scopes.split(',') {
                if let Some(user) = entry.strip_prefix("user:") {
                    if user.is_empty() || user == "*" {
                        return Err(format!(
                            "line {}: `user:` needs a user id or a prefix followed by `*`",
                            i + 1
                        ));
                    }
                    users.get_or_insert_with(Vec::new).push(user.to_string());
                    continue;
                }
                granted.insert(
                    Scope::parse(entry)
                        .ok_or_else(|| format!("line {}: unknown scope `{entry}`", i + 1))?,
                );
            }
            if users.is_some()
                && !(granted.contains(&Scope::Ingest) || granted.contains(&Scope::Postings))
            {
                return Err(format!(
                    "line {}: `user:` binds reader tokens; give `ingest` or `postings` too",
                    i + 1
                ));
            }
            let scopes = granted;
            if token.len() < MIN_TOKEN_LEN {
                return Err(format!(
                    "line {}: token shorter than {MIN_TOKEN_LEN} characters",
                    i + 1
                ));
            }
            if entries.iter().any(|(t, _)| t == token.as_bytes()) {
                return Err(format!("line {}: token used twice", i + 1));
            }
            entries.push((
                token.as_bytes().to_vec(),
                Identity {
                    name: name.to_string(),
                    scopes,
                    users,
                },
            ));
        }
        if entries.is_empty() {
            return Err("no tokens".into());
        }
        Ok(Tokens { entries })
    }

    /// The identity of `token`, compared against every entry in constant time.
    pub fn identify(&self, token: &[u8]) -> Option<&Identity> {
        let mut found = None;
        for (t, id) in &self.entries {
            if constant_time_eq(t, token) {
                found = Some(id);
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A file's contents, when it could be read: a reload is decided by what the file says, not
/// by its size and modification time (a token replaced by one of the same length in a file
/// that keeps its timestamp — `cp -p`, `tar`, `rsync -t`, two writes in one tick — must
/// still take effect).
type Stamp = Option<Vec<u8>>;

/// The tokens in force, reloaded from their file when it changes.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    state: RwLock<(Stamp, Arc<Tokens>)>,
}

impl TokenFile {
    /// Reads `path`; a missing or invalid file is an error (the server must not start
    /// open by mistake).
    pub fn open(path: &Path) -> anyhow::Result<Arc<TokenFile>> {
        let stamp = stamp(path)?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the token file {}: {e}", path.display()))?;
        let tokens = Tokens::parse(&text)
            .map_err(|e| anyhow::anyhow!("token file {}: {e}", path.display()))?;
        Ok(Arc::new(TokenFile {
            path: path.to_path_buf(),
            state: RwLock::new((Some(stamp), Arc::new(tokens))),
        }))
    }

    /// The tokens in force.
    pub fn tokens(&self) -> Arc<Tokens> {
        self.state.read().expect("token lock").1.clone()
    }

    /// Reads the file again if its size or modification time changed. Returns whether new
    /// tokens took effect; a file that does not parse keeps the old ones (logged, counted).
    pub fn reload_if_changed(&self) -> bool {
        let now = stamp(&self.path).ok();
        if now == self.state.read().expect("token lock").0 {
            return false;
        }
        let parsed = match &now {
            Some(bytes) => std::str::from_utf8(bytes)
                .map_err(|e| format!("not UTF-8: {e}"))
                .and_then(Tokens::parse),
            None => Err("the file cannot be read".to_string()),
        };
        let mut st = self.state.write().expect("token lock");
        st.0 = now;
        match parsed {
            Ok(tokens) => {
                st.1 = Arc::new(tokens);
                tracing::info!(path = %self.path.display(), "token file reloaded");
                true
            }
            Err(e) => {
                metrics::counter!(AUTH_RELOAD_FAILURES_TOTAL).increment(1);
                tracing::error!(path = %self.path.display(), error = %e, "token file not reloaded; the previous tokens stay in force");
                false
            }
        }
    }

    /// Checks the file every `every` until `stop` fires.
    pub async fn watch(self: Arc<Self>, every: Duration, stop: tokio::sync::watch::Receiver<bool>) {
        crate::process::every_until(every, stop, || {
            self.reload_if_changed();
        })
        .await
    }
}

fn stamp(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("reading the token file {}: {e}", path.display()))
}

/// Whether the caller may act for `user_id`: an open guard (no identity) may.
pub fn may_act_for(identity: Option<&Identity>, user_id: &str) -> bool {
    identity.is_none_or(|id| id.may_act_for(user_id))
}

/// The check every request passes: `None` lets everything through (loopback-only
/// development, `--insecure-loopback`).
#[derive(Clone, Debug, Default)]
pub struct Guard {
    tokens: Option<Arc<TokenFile>>,
}

impl Guard {
    /// A guard over `tokens` (`None`: open).
    pub fn new(tokens: Option<Arc<TokenFile>>) -> Self {
        Guard { tokens }
    }

    /// The token file, when tokens are checked.
    pub fn token_file(&self) -> Option<Arc<TokenFile>> {
        self.tokens.clone()
    }

    /// The identity a request carries, or the status that refuses it. `Ok(None)`: allowed
    /// without identity (open guard, or a health check).
    pub fn check(&self, path: &str, headers: &http::HeaderMap) -> Result<Option<Identity>, Status> {
        let Some(file) = &self.tokens else {
            return Ok(None);
        };
        let need = match Scope::for_path(path) {
            Need::Nothing => return Ok(None),
            Need::Scope(s) => s,
            Need::Unknown => {
                return Err(Status::permission_denied(format!("no scope allows {path}")))
            }
        };
        let token = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(token) = token else {
            metrics::counter!(AUTH_REFUSALS_TOTAL, "reason" => "unauthenticated").increment(1);
            return Err(Status::unauthenticated(
                "missing bearer token (authorization: Bearer <token>)",
            ));
        };
        let tokens = file.tokens();
        let Some(id) = tokens.identify(token.as_bytes()) else {
            metrics::counter!(AUTH_REFUSALS_TOTAL, "reason" => "unauthenticated").increment(1);
            return Err(Status::unauthenticated("unknown bearer token"));
        };
        if !id.has(need) {
            metrics::counter!(AUTH_REFUSALS_TOTAL, "reason" => "permission_denied").increment(1);
            return Err(Status::permission_denied(format!(
                "token `{}` lacks the scope this call needs",
                id.name
            )));
        }
        Ok(Some(id.clone()))
    }
}

/// The tower layer that puts a [`Guard`] in front of a gRPC server's routes.
#[derive(Clone, Debug)]
pub struct AuthLayer(pub Guard);

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            guard: self.0.clone(),
        }
    }
}

/// See [`AuthLayer`].
#[derive(Clone, Debug)]
pub struct AuthService<S> {
    inner: S,
    guard: Guard,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for AuthService<S>
where
    S: tower_service::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<ReqBody>) -> Self::Future {
        match self.guard.check(req.uri().path(), req.headers()) {
            Ok(id) => {
                if let Some(id) = id {
                    req.extensions_mut().insert(id);
                }
                Box::pin(self.inner.call(req))
            }
            Err(status) => Box::pin(async move { Ok(status.into_http()) }),
        }
    }
}

/// For WorkerControl calls naming a worker session: refuses a session that is not the
/// caller's own (`worker_id` is `name#n`). Open servers (no identity) allow all.
pub fn own_session(id: Option<&Identity>, worker_id: &str) -> Result<(), Status> {
    match id {
        None => Ok(()),
        Some(id)
            if worker_id
                .rsplit_once('#')
                .is_some_and(|(name, _)| id.may_act_as(name)) =>
        {
            Ok(())
        }
        Some(id) => Err(Status::permission_denied(format!(
            "worker `{}` may not use another worker's session",
            id.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const T2: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn headers(token: Option<&str>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        if let Some(t) = token {
            h.insert(
                http::header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn methods_map_to_scopes() {
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/ListFeeds"),
            Need::Scope(Scope::AdminRead)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/InspectFeedPlan"),
            Need::Scope(Scope::AdminRead)
        );
        // The learned history an export reads: a read.
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/ListFeedHistory"),
            Need::Scope(Scope::AdminRead)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/AddFeed"),
            Need::Scope(Scope::AdminWrite)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/UpdateSettings"),
            Need::Scope(Scope::AdminWrite)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Admin/ImportOpml"),
            Need::Scope(Scope::AdminWrite)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Ingest/StreamAccesses"),
            Need::Scope(Scope::Ingest)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.Postings/ListPostings"),
            Need::Scope(Scope::Postings)
        );
        assert_eq!(
            Scope::for_path("/kairos.v1.WorkerControl/Register"),
            Need::Scope(Scope::Worker)
        );
        assert_eq!(
            Scope::for_path("/grpc.health.v1.Health/Check"),
            Need::Nothing
        );
        assert_eq!(Scope::for_path("/something.Else/Call"), Need::Unknown);
    }

    #[test]
    fn the_token_file_is_strict() {
        assert!(
            Tokens::parse("").is_err(),
            "no tokens is not an open server"
        );
        assert!(Tokens::parse(&format!("a admin:root {T1}"))
            .unwrap_err()
            .contains("line 1"));
        assert!(Tokens::parse("a admin:read short")
            .unwrap_err()
            .contains("shorter"));
        assert!(Tokens::parse(&format!("a ingest {T1}\nb postings {T1}"))
            .unwrap_err()
            .contains("twice"));
        assert!(Tokens::parse("a ingest").is_err());
        let t = Tokens::parse(&format!(
            "# comment\nops admin:read,admin:write {T1} # trailing\n\nw worker {T2}\n"
        ))
        .unwrap();
        assert_eq!(t.identify(T1.as_bytes()).unwrap().name, "ops");
        assert!(t.identify(T2.as_bytes()).unwrap().has(Scope::Worker));
        assert!(t.identify(b"bbbbbbbbbbbbbbbbbbbbbbbbbbbc").is_none());
        assert!(t.identify(b"").is_none());
    }

    #[test]
    fn the_guard_refuses_missing_wrong_and_underscoped_tokens() {
        let dir = std::env::temp_dir().join(format!("kairos-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, format!("dash admin:read {T1}\n")).unwrap();
        let g = Guard::new(Some(TokenFile::open(&path).unwrap()));
        let add = "/kairos.v1.Admin/AddFeed";
        let list = "/kairos.v1.Admin/ListFeeds";
        assert_eq!(
            g.check(list, &headers(None)).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            g.check(list, &headers(Some(T2))).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            g.check(add, &headers(Some(T1))).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            g.check(list, &headers(Some(T1))).unwrap().unwrap().name,
            "dash"
        );
        assert_eq!(
            g.check("/grpc.health.v1.Health/Check", &headers(None))
                .unwrap(),
            None
        );
        // Rotated: T2 replaces T1 with write access; a broken file afterwards keeps T2.
        std::fs::write(
            &path,
            format!("ops admin:read,admin:write {T2}\n# rotated\n"),
        )
        .unwrap();
        let file = g.tokens.clone().unwrap();
        assert!(file.reload_if_changed());
        assert_eq!(
            g.check(add, &headers(Some(T1))).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert!(g.check(add, &headers(Some(T2))).is_ok());
        std::fs::write(&path, "ops admin:write\n").unwrap();
        assert!(!file.reload_if_changed());
        assert!(
            g.check(add, &headers(Some(T2))).is_ok(),
            "a broken file keeps the old tokens"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // Open guard: everything passes, with no identity.
        assert_eq!(Guard::new(None).check(add, &headers(None)).unwrap(), None);
    }

    #[test]
    fn a_token_replaced_with_the_same_length_and_timestamp_is_picked_up() {
        let dir = std::env::temp_dir().join(format!("kairos-auth-same-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, format!("app postings {T1}\n")).unwrap();
        let stamp = std::fs::metadata(&path).unwrap().modified().unwrap();
        let file = TokenFile::open(&path).unwrap();
        assert!(!file.reload_if_changed(), "nothing changed");
        // `cp -p` of a rotated file: the same length, the old modification time.
        assert_eq!(T1.len(), T2.len());
        std::fs::write(&path, format!("app postings {T2}\n")).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(stamp)
            .unwrap();
        assert!(file.reload_if_changed(), "the new token takes effect");
        assert!(
            file.tokens().identify(T1.as_bytes()).is_none(),
            "the old one is refused"
        );
        assert!(file.tokens().identify(T2.as_bytes()).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_worker_token_uses_only_its_own_sessions() {
        let id = Identity {
            name: "w1".into(),
            scopes: [Scope::Worker].into_iter().collect(),
            users: None,
        };
        assert!(own_session(Some(&id), "w1#3").is_ok());
        assert!(own_session(Some(&id), "w10#3").is_err());
        assert!(own_session(Some(&id), "w1").is_err());
        assert!(own_session(None, "anything#1").is_ok());
        let fleet = Identity {
            name: "kairos-worker-*".into(),
            scopes: [Scope::Worker].into_iter().collect(),
            users: None,
        };
        assert!(fleet.may_act_as("kairos-worker-7d9f-x2"));
        assert!(!fleet.may_act_as("kairos-worker-"));
        assert!(!fleet.may_act_as("evil"));
        assert!(own_session(Some(&fleet), "kairos-worker-abc#4").is_ok());
        assert!(own_session(Some(&fleet), "other#4").is_err());
    }

    #[test]
    fn reader_tokens_bound_to_users_act_only_for_them() {
        let t = |n: u8| (n as char).to_string().repeat(MIN_TOKEN_LEN);
        let tokens = Tokens::parse(&format!(
            "all ingest,postings {}\nalice postings,user:alice {}\npair ingest,user:alice,user:bob {}\ntenant postings,user:b-* {}\n",
            t(b'a'),
            t(b'b'),
            t(b'c'),
            t(b'd')
        ))
        .unwrap();
        let id = |n: u8| tokens.identify(t(n).as_bytes()).unwrap().clone();
        let (all, alice, pair, tenant) = (id(b'a'), id(b'b'), id(b'c'), id(b'd'));
        assert!(!all.bound_to_users() && all.may_act_for("anyone"));
        assert!(alice.bound_to_users());
        assert!(alice.may_act_for("alice"));
        assert!(!alice.may_act_for("alice2") && !alice.may_act_for("bob"));
        assert!(pair.may_act_for("alice") && pair.may_act_for("bob"));
        assert!(!pair.may_act_for("carol"));
        assert!(tenant.may_act_for("b-1") && tenant.may_act_for("b-"));
        assert!(!tenant.may_act_for("a-1") && !tenant.may_act_for("xb-1"));
        assert!(may_act_for(None, "anyone"), "an open guard acts for all");
        assert!(!may_act_for(Some(&alice), "bob"));
        // A binding is not a scope, and means nothing without a reader scope.
        assert!(!alice.has(Scope::Ingest));
        for bad in [
            format!("x worker,user:w {}", t(b'e')),
            format!("x postings,user: {}", t(b'e')),
            format!("x postings,user:* {}", t(b'e')),
        ] {
            assert!(Tokens::parse(&bad).is_err(), "{bad}");
        }
    }
}
