//! The subcommands over the Admin API (OPML is in [`crate::opml`]).

use crate::output::{self, duration, pairs, per_day, print, table, Format};
use crate::{Admin, Failure};
use clap::Subcommand;
use kairos_proto::v1 as pb;
use serde_json::{json, Value};

/// Feed subcommands.
#[derive(Subcommand, Debug)]
pub enum Feeds {
    /// Every feed (paged through the whole registry).
    List,
    /// One feed and its fetch health.
    Get { feed_id: String },
    /// Registers a feed by its URL.
    Add {
        url: String,
        /// Feed id (default: derived from the URL).
        #[arg(long)]
        id: Option<String>,
        /// Importance weight (default 1).
        #[arg(long)]
        weight: Option<f64>,
    },
    /// Removes a feed, its subscriptions, learned state, stored postings and item markers.
    Remove { feed_id: String },
    /// Fetches a `gone` feed again.
    Resume { feed_id: String },
    /// The feed's learned pattern, planned fetch times and expected delay.
    Plan { feed_id: String },
}

/// User subcommands.
#[derive(Subcommand, Debug)]
pub enum Users {
    /// Every user.
    List,
    /// One user.
    Get { user_id: String },
    /// Adds (or re-weights) a user.
    Add {
        user_id: String,
        /// Weight of the user's reading (default 1).
        #[arg(long)]
        weight: Option<f64>,
    },
    /// Removes a user, their subscriptions and their reader access statistics.
    Remove { user_id: String },
}

/// Subscription subcommands.
#[derive(Subcommand, Debug)]
pub enum Subs {
    /// A user's feeds or a feed's readers.
    List {
        #[arg(long, conflicts_with = "feed", required_unless_present = "feed")]
        user: Option<String>,
        #[arg(long)]
        feed: Option<String>,
    },
    /// Subscribes a user to a feed.
    Add { user_id: String, feed_id: String },
    /// Ends a subscription.
    Remove { user_id: String, feed_id: String },
}

/// OPML subcommands.
#[derive(Subcommand, Debug)]
pub enum Opml {
    /// Registers every feed of an OPML file (`-` reads stdin).
    Import {
        file: std::path::PathBuf,
        /// Subscribe this user to every imported feed.
        #[arg(long)]
        user: Option<String>,
    },
    /// Writes the registered feeds (or one user's) as OPML 2.0 to stdout.
    Export {
        /// Only this user's subscriptions.
        #[arg(long)]
        user: Option<String>,
    },
}

/// Settings subcommands.
#[derive(Subcommand, Debug)]
pub enum Settings {
    /// The settings in force.
    Get,
    /// Changes the given settings; the others keep their values. The next replan uses them.
    Set {
        /// Total fetches per day over all feeds.
        #[arg(long, conflicts_with = "per_feed")]
        budget: Option<f64>,
        /// Fetches per feed per day: the total follows the number of feeds.
        #[arg(long = "fetches-per-feed-per-day", id = "per_feed")]
        fetches_per_feed_per_day: Option<f64>,
        /// `delay`, `miss` or `access-delay`.
        #[arg(long)]
        metric: Option<String>,
        /// `uniform`, `sched-only`, `alloc-only`, `combined` or `optimal`.
        #[arg(long)]
        policy: Option<String>,
        /// Per-feed minimum fetches per day (a fraction: once every k days).
        #[arg(long)]
        min_per_day: Option<f64>,
        /// Per-feed maximum fetches per day (0 removes the maximum).
        #[arg(long)]
        max_per_day: Option<f64>,
        /// Slots per day.
        #[arg(long)]
        slots: Option<u32>,
    },
}

/// Host-limit subcommands.
#[derive(Subcommand, Debug)]
pub enum Hosts {
    /// The operator's per-host limits.
    List,
    /// Caps a host at N fetches per day over all its feeds (0 clears the cap).
    Limit { host: String, fetches_per_day: f64 },
}

fn refused(what: &str) -> impl FnOnce(tonic::Status) -> Failure + '_ {
    move |s| Failure::from_status(what, s)
}

fn feed_json(f: &pb::Feed) -> Value {
    json!({
        "feed_id": f.feed_id, "url": f.url, "weight": f.weight, "host": f.host,
        "status": f.status, "consecutive_failures": f.consecutive_failures,
        "last_error": f.last_error, "title": f.title, "site_url": f.site_url,
        "format": f.format, "websub_hubs": f.websub_hubs, "websub_topic": f.websub_topic,
        "push_state": f.push_state, "push_hub": f.push_hub, "push_poll_share": f.push_poll_share,
    })
}

fn feed_rows(feeds: &[pb::Feed]) -> String {
    let rows: Vec<Vec<String>> = feeds
        .iter()
        .map(|f| {
            vec![
                f.feed_id.clone(),
                f.status.clone(),
                format!("{}", f.weight),
                f.format.clone(),
                f.url.clone(),
                f.title.chars().take(40).collect(),
            ]
        })
        .collect();
    table(
        &["FEED", "STATUS", "WEIGHT", "FORMAT", "URL", "TITLE"],
        &rows,
    )
}

/// Every feed, paged.
pub async fn all_feeds(admin: &mut Admin) -> Result<Vec<pb::Feed>, Failure> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = admin
            .list_feeds(pb::ListFeedsRequest {
                after_feed_id: after.clone(),
                limit: 1000,
            })
            .await
            .map_err(refused("listing feeds"))?
            .into_inner()
            .feeds;
        let Some(last) = page.last() else { break };
        after = last.feed_id.clone();
        all.extend(page);
    }
    Ok(all)
}

pub async fn feeds(admin: &mut Admin, out: Format, c: Feeds) -> Result<(), Failure> {
    match c {
        Feeds::List => {
            let feeds = all_feeds(admin).await?;
            print(
                out,
                Value::Array(feeds.iter().map(feed_json).collect()),
                || feed_rows(&feeds),
            );
        }
        Feeds::Get { feed_id } => {
            let f = admin
                .get_feed(pb::GetFeedRequest { feed_id })
                .await
                .map_err(refused("feed"))?
                .into_inner();
            print(out, feed_json(&f), || {
                pairs(&[
                    ("feed", f.feed_id.clone()),
                    ("title", f.title.clone()),
                    ("url", f.url.clone()),
                    ("site", f.site_url.clone()),
                    ("format", f.format.clone()),
                    ("websub hubs", f.websub_hubs.join(" ")),
                    ("websub topic", f.websub_topic.clone()),
                    (
                        "push",
                        if f.push_state.is_empty() {
                            "-".to_string()
                        } else {
                            format!(
                                "{} at {}; polls planned for {:.1}% of postings",
                                f.push_state,
                                f.push_hub,
                                f.push_poll_share * 100.0
                            )
                        },
                    ),
                    ("host", f.host.clone()),
                    ("weight", f.weight.to_string()),
                    ("status", f.status.clone()),
                    ("failures in a row", f.consecutive_failures.to_string()),
                    ("last error", f.last_error.clone()),
                ])
            });
        }
        Feeds::Add { url, id, weight } => {
            let f = admin
                .add_feed(pb::AddFeedRequest {
                    feed_id: id.unwrap_or_default(),
                    url,
                    weight: weight.unwrap_or(0.0),
                })
                .await
                .map_err(refused("adding the feed"))?
                .into_inner();
            print(out, feed_json(&f), || {
                format!("added {} ({})\n", f.feed_id, f.url)
            });
        }
        Feeds::Remove { feed_id } => {
            admin
                .remove_feed(pb::RemoveFeedRequest {
                    feed_id: feed_id.clone(),
                })
                .await
                .map_err(refused("removing the feed"))?;
            print(out, json!({"removed": feed_id}), || {
                format!("removed {feed_id}\n")
            });
        }
        Feeds::Resume { feed_id } => {
            let f = admin
                .resume_feed(pb::ResumeFeedRequest { feed_id })
                .await
                .map_err(refused("resuming the feed"))?
                .into_inner();
            print(out, feed_json(&f), || {
                format!("{} is {} again\n", f.feed_id, f.status)
            });
        }
        Feeds::Plan { feed_id } => {
            let v = admin
                .inspect_feed_plan(pb::InspectFeedPlanRequest { feed_id })
                .await
                .map_err(refused("the feed's plan"))?
                .into_inner();
            let json = json!({
                "feed_id": v.feed_id, "status": v.status,
                "fetches_per_day": v.fetches_per_day,
                "max_fetches_per_day": v.max_fetches_per_day,
                "expected_delay_seconds": v.expected_delay_seconds,
                "observed_postings": v.observed_postings,
                "period_seconds": v.period_seconds,
                "fetch_offsets_seconds": v.fetch_offsets_seconds,
                "posting_rate_per_hour": v.posting_rate_per_hour,
                "access_rate_per_hour": v.access_rate_per_hour,
                "constraints": v.constraints,
                "not_before_unix_ms": v.not_before_unix_ms,
            });
            print(out, json, || plan_text(&v));
        }
    }
    Ok(())
}

/// Hours of the period with their learned rates, as a compact profile.
fn profile(rates: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = rates.iter().cloned().fold(0.0, f64::max);
    if max <= 0.0 {
        return "(none learned yet)".into();
    }
    let daily: f64 = rates.iter().sum::<f64>() * 24.0 / rates.len().max(1) as f64;
    let bars: String = rates
        .iter()
        .map(|&r| BARS[((r / max) * 7.0).round().clamp(0.0, 7.0) as usize])
        .collect();
    format!("{bars}  ({} a day, peak {:.2}/h)", per_day(daily), max)
}

fn plan_text(v: &pb::FeedPlanView) -> String {
    let times: Vec<String> = v
        .fetch_offsets_seconds
        .iter()
        .map(|&s| output::offset(s, v.period_seconds))
        .collect();
    let mut rows = vec![
        ("feed", v.feed_id.clone()),
        ("status", v.status.clone()),
        (
            "fetches per day",
            if v.max_fetches_per_day > 0.0 {
                format!(
                    "{} (at most {})",
                    per_day(v.fetches_per_day),
                    per_day(v.max_fetches_per_day)
                )
            } else {
                per_day(v.fetches_per_day)
            },
        ),
        (
            "expected delay",
            format!("{} per posting", duration(v.expected_delay_seconds)),
        ),
        ("postings observed", v.observed_postings.to_string()),
        ("postings by hour", profile(&v.posting_rate_per_hour)),
        ("reads by hour", profile(&v.access_rate_per_hour)),
        (
            "fetch times",
            format!(
                "{} (UTC, every {})",
                if times.is_empty() {
                    "-".to_string()
                } else {
                    times.join(" ")
                },
                duration(v.period_seconds)
            ),
        ),
    ];
    for c in &v.constraints {
        rows.push(("bounded by", c.clone()));
    }
    if v.not_before_unix_ms > 0 {
        rows.push(("not before", unix_ms_text(v.not_before_unix_ms)));
    }
    pairs(&rows)
}

fn unix_ms_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

fn user_json(u: &pb::User) -> Value {
    json!({"user_id": u.user_id, "weight": u.weight})
}

pub async fn users(admin: &mut Admin, out: Format, c: Users) -> Result<(), Failure> {
    match c {
        Users::List => {
            let mut all = Vec::new();
            let mut after = String::new();
            loop {
                let page = admin
                    .list_users(pb::ListUsersRequest {
                        after_user_id: after.clone(),
                        limit: 1000,
                    })
                    .await
                    .map_err(refused("listing users"))?
                    .into_inner()
                    .users;
                let Some(last) = page.last() else { break };
                after = last.user_id.clone();
                all.extend(page);
            }
            print(
                out,
                Value::Array(all.iter().map(user_json).collect()),
                || {
                    let rows: Vec<Vec<String>> = all
                        .iter()
                        .map(|u| vec![u.user_id.clone(), u.weight.to_string()])
                        .collect();
                    table(&["USER", "WEIGHT"], &rows)
                },
            );
        }
        Users::Get { user_id } => {
            let u = admin
                .get_user(pb::GetUserRequest { user_id })
                .await
                .map_err(refused("user"))?
                .into_inner();
            print(out, user_json(&u), || {
                pairs(&[
                    ("user", u.user_id.clone()),
                    ("weight", u.weight.to_string()),
                ])
            });
        }
        Users::Add { user_id, weight } => {
            let u = admin
                .add_user(pb::AddUserRequest {
                    user_id,
                    weight: weight.unwrap_or(0.0),
                })
                .await
                .map_err(refused("adding the user"))?
                .into_inner();
            print(out, user_json(&u), || format!("added {}\n", u.user_id));
        }
        Users::Remove { user_id } => {
            admin
                .remove_user(pb::RemoveUserRequest {
                    user_id: user_id.clone(),
                })
                .await
                .map_err(refused("removing the user"))?;
            print(out, json!({"removed": user_id}), || {
                format!("removed {user_id}\n")
            });
        }
    }
    Ok(())
}

pub async fn subs(admin: &mut Admin, out: Format, c: Subs) -> Result<(), Failure> {
    use pb::list_subscriptions_request::Scope;
    match c {
        Subs::List { user, feed } => {
            let scope = match (user, feed) {
                (Some(u), _) => Scope::UserId(u),
                (None, Some(f)) => Scope::FeedId(f),
                (None, None) => return Err(Failure::Local("give --user or --feed".into())),
            };
            let subs = admin
                .list_subscriptions(pb::ListSubscriptionsRequest { scope: Some(scope) })
                .await
                .map_err(refused("subscriptions"))?
                .into_inner()
                .subscriptions;
            let json = subs
                .iter()
                .map(|s| json!({"user_id": s.user_id, "feed_id": s.feed_id}))
                .collect();
            print(out, Value::Array(json), || {
                let rows: Vec<Vec<String>> = subs
                    .iter()
                    .map(|s| vec![s.user_id.clone(), s.feed_id.clone()])
                    .collect();
                table(&["USER", "FEED"], &rows)
            });
        }
        Subs::Add { user_id, feed_id } => {
            let s = admin
                .subscribe(pb::SubscribeRequest { user_id, feed_id })
                .await
                .map_err(refused("subscribing"))?
                .into_inner();
            print(
                out,
                json!({"user_id": s.user_id, "feed_id": s.feed_id}),
                || format!("{} reads {}\n", s.user_id, s.feed_id),
            );
        }
        Subs::Remove { user_id, feed_id } => {
            admin
                .unsubscribe(pb::UnsubscribeRequest {
                    user_id: user_id.clone(),
                    feed_id: feed_id.clone(),
                })
                .await
                .map_err(refused("unsubscribing"))?;
            print(
                out,
                json!({"unsubscribed": {"user_id": user_id, "feed_id": feed_id}}),
                || format!("{user_id} no longer reads {feed_id}\n"),
            );
        }
    }
    Ok(())
}

fn settings_json(s: &pb::Settings) -> Value {
    json!({
        "budget_fetches_per_day": s.budget_fetches_per_day,
        "budget_fetches_per_feed_per_day": s.budget_fetches_per_feed_per_day,
        "metric": s.metric,
        "policy": s.policy, "min_fetches_per_day": s.min_fetches_per_day,
        "max_fetches_per_day": s.max_fetches_per_day,
        "max_fetches_per_host_per_day": s.max_fetches_per_host_per_day,
        "slots": s.slots, "replan_interval_seconds": s.replan_interval_seconds,
    })
}

fn settings_text(s: &pb::Settings) -> String {
    pairs(&[
        (
            "budget",
            if s.budget_fetches_per_feed_per_day > 0.0 {
                format!(
                    "{} fetches per feed a day ({} a day at the feeds planned now)",
                    per_day(s.budget_fetches_per_feed_per_day),
                    per_day(s.budget_fetches_per_day)
                )
            } else {
                format!("{} fetches a day", per_day(s.budget_fetches_per_day))
            },
        ),
        ("metric", s.metric.clone()),
        ("policy", s.policy.clone()),
        (
            "per feed",
            if s.max_fetches_per_day > 0.0 {
                format!(
                    "{} to {} fetches a day",
                    per_day(s.min_fetches_per_day),
                    per_day(s.max_fetches_per_day)
                )
            } else {
                format!(
                    "at least {} fetches a day, no maximum",
                    per_day(s.min_fetches_per_day)
                )
            },
        ),
        ("slots per day", s.slots.to_string()),
        ("replan every", duration(s.replan_interval_seconds as f64)),
    ])
}

pub async fn settings(admin: &mut Admin, out: Format, c: Settings) -> Result<(), Failure> {
    let s = match c {
        Settings::Get => admin
            .get_settings(pb::GetSettingsRequest {})
            .await
            .map_err(refused("settings"))?
            .into_inner(),
        Settings::Set {
            budget,
            fetches_per_feed_per_day,
            metric,
            policy,
            min_per_day,
            max_per_day,
            slots,
        } => {
            use pb::settings_patch::Budget;
            let asked = pb::SettingsPatch {
                budget: budget
                    .map(Budget::FetchesPerDay)
                    .or(fetches_per_feed_per_day.map(Budget::FetchesPerFeedPerDay)),
                metric,
                policy,
                min_fetches_per_day: min_per_day,
                max_fetches_per_day: max_per_day,
                slots,
            };
            if asked == pb::SettingsPatch::default() {
                return Err(Failure::Local(
                    "nothing to change: give at least one of --budget, --fetches-per-feed-per-day, --metric, --policy, --min-per-day, --max-per-day, --slots".into(),
                ));
            }
            admin
                .update_settings(asked)
                .await
                .map_err(refused("changing the settings"))?
                .into_inner()
        }
    };
    print(out, settings_json(&s), || settings_text(&s));
    Ok(())
}

pub async fn hosts(admin: &mut Admin, out: Format, c: Hosts) -> Result<(), Failure> {
    let limits = match c {
        Hosts::List => {
            admin
                .list_host_limits(pb::ListHostLimitsRequest {})
                .await
                .map_err(refused("host limits"))?
                .into_inner()
                .limits
        }
        Hosts::Limit {
            host,
            fetches_per_day,
        } => vec![admin
            .set_host_limit(pb::SetHostLimitRequest {
                host,
                max_fetches_per_day: fetches_per_day,
            })
            .await
            .map_err(refused("setting the host limit"))?
            .into_inner()],
    };
    let json = limits
        .iter()
        .map(|l| json!({"host": l.host, "max_fetches_per_day": l.max_fetches_per_day}))
        .collect();
    print(out, Value::Array(json), || {
        let rows: Vec<Vec<String>> = limits
            .iter()
            .map(|l| vec![l.host.clone(), per_day(l.max_fetches_per_day)])
            .collect();
        table(&["HOST", "MAX FETCHES/DAY"], &rows)
    });
    Ok(())
}

pub async fn stats(admin: &mut Admin, out: Format) -> Result<(), Failure> {
    let s = admin
        .get_stats(pb::GetStatsRequest {})
        .await
        .map_err(refused("stats"))?
        .into_inner();
    let json = json!({
        "feeds": s.feeds, "users": s.users, "subscriptions": s.subscriptions,
        "workers": s.workers, "budget_fetches_per_day": s.budget_fetches_per_day,
        "allocated_fetches_per_day": s.allocated_fetches_per_day,
        "capacity_floor_fetches_per_day": s.capacity_floor_fetches_per_day,
        "expected_lost_postings_per_day": s.expected_lost_postings_per_day,
        "feeds_overdue": s.feeds_overdue,
        "fetches_total": s.fetches_total, "postings_total": s.postings_total,
        "realized_avg_delay_seconds": s.realized_avg_delay_seconds,
        "expected_avg_delay_seconds": s.expected_avg_delay_seconds,
        "report_backlog": s.report_backlog, "fetches_same_slot": s.fetches_same_slot,
        "stored_plan_written_unix_ms": s.stored_plan_written_unix_ms,
        "stored_plan_feeds": s.stored_plan_feeds,
    });
    let plan =
        if s.stored_plan_written_unix_ms > 0 {
            format!(
            "the previous leader's, written {} ({} feeds), until this leader's first round ends",
            chrono::DateTime::from_timestamp_millis(s.stored_plan_written_unix_ms)
                .map_or_else(|| s.stored_plan_written_unix_ms.to_string(), |t| t.to_rfc3339()),
            s.stored_plan_feeds
        )
        } else {
            "this leader's".to_string()
        };
    print(out, json, || {
        pairs(&[
            ("feeds", s.feeds.to_string()),
            ("users", s.users.to_string()),
            ("subscriptions", s.subscriptions.to_string()),
            ("workers", s.workers.to_string()),
            (
                "fetches a day",
                format!(
                    "{} planned of a {} budget{}",
                    per_day(s.allocated_fetches_per_day),
                    per_day(s.budget_fetches_per_day),
                    if s.capacity_floor_fetches_per_day > 0.0 {
                        format!(
                            ", {} held by document floors",
                            per_day(s.capacity_floor_fetches_per_day)
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            ("plan in force", plan),
            ("fetches", s.fetches_total.to_string()),
            ("postings", s.postings_total.to_string()),
            (
                "expected lost",
                format!(
                    "{} a day (scrolled off a document before any fetch)",
                    per_day(s.expected_lost_postings_per_day)
                ),
            ),
            (
                "delay per posting",
                format!(
                    "{} seen, {} expected",
                    duration(s.realized_avg_delay_seconds),
                    duration(s.expected_avg_delay_seconds)
                ),
            ),
            ("report backlog", s.report_backlog.to_string()),
            ("slots fetched twice", s.fetches_same_slot.to_string()),
            (
                "feeds overdue",
                format!(
                    "{} (unfetched past their plan's longest gap and a day)",
                    s.feeds_overdue
                ),
            ),
        ])
    });
    Ok(())
}

pub async fn workers(admin: &mut Admin, out: Format) -> Result<(), Failure> {
    let ws = admin
        .list_workers(pb::ListWorkersRequest {})
        .await
        .map_err(refused("workers"))?
        .into_inner()
        .workers;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let json = ws
        .iter()
        .map(|w| {
            json!({
                "worker_id": w.worker_id, "worker_name": w.worker_name,
                "capacity_fetches_per_second": w.capacity_fetches_per_second,
                "hosts": w.hosts, "feeds": w.feeds,
                "last_heartbeat_unix_ms": w.last_heartbeat_unix_ms,
                "desired_version": w.desired_version, "applied_version": w.applied_version,
                "in_flight": w.in_flight, "report_backlog": w.report_backlog,
            })
        })
        .collect();
    print(out, Value::Array(json), || {
        let rows: Vec<Vec<String>> = ws
            .iter()
            .map(|w| {
                vec![
                    w.worker_name.clone(),
                    w.worker_id.clone(),
                    format!("{}/s", w.capacity_fetches_per_second),
                    w.hosts.to_string(),
                    w.feeds.to_string(),
                    w.in_flight.to_string(),
                    w.report_backlog.to_string(),
                    format!("{}/{}", w.applied_version, w.desired_version),
                    // The coordinator's clock may run compressed (demos, tests): an age only
                    // means something on a wall clock, so show the time when it is far off.
                    match (now - w.last_heartbeat_unix_ms) as f64 / 1000.0 {
                        age if (0.0..86_400.0).contains(&age) => {
                            format!("{} ago", duration(age))
                        }
                        _ => unix_ms_text(w.last_heartbeat_unix_ms),
                    },
                ]
            })
            .collect();
        table(
            &[
                "NAME",
                "SESSION",
                "CAPACITY",
                "HOSTS",
                "FEEDS",
                "IN FLIGHT",
                "BACKLOG",
                "APPLIED/WANTED",
                "HEARTBEAT",
            ],
            &rows,
        )
    });
    Ok(())
}
