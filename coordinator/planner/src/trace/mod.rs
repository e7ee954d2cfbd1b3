//! Loading a trace folder (`DESIGN.md` §6) with errors that name the file and line.
//!
//! Files: `feeds.csv` (`feed_id,weight[,host]`), `postings.csv` (`feed_id,ts`),
//! `users.csv` (`user_id,weight`), `subscriptions.csv` (`user_id,feed_id`), `accesses.csv`
//! (`user_id,feed_id,ts`, empty `feed_id` = app-level access). Times are seconds from the
//! trace start (midnight of day 0), rows in any order. `users.csv`, `subscriptions.csv` and
//! `accesses.csv` may be absent together (a posting-only trace); `host` is an optional
//! extension used by the per-host politeness cap.

mod rows;

use crate::time::DAY_S;
use rows::read_rows;
use std::collections::HashMap;

/// Dense index by external id; each posting and access row looks one up. Keys of up to 24
/// bytes are stored inside the table (a `String` key costs a second cache and TLB miss per
/// lookup, which made lookups 4/5 of a million-feed load), and the hash is a fast one: the
/// ids come from the operator's own files.
type IdMap = HashMap<compact_str::CompactString, u32, foldhash::fast::RandomState>;
use std::path::{Path, PathBuf};

/// Unix ms at which the live tools (`replay`, the live learner on a trace) place the trace's
/// time 0: Monday 2026-03-02 00:00 UTC, so trace day 0 is a Monday for the weekly model
/// (whose days count from the Unix epoch).
pub const TRACE_ORIGIN_MS: i64 = 1_772_409_600_000;

/// A malformed or missing trace input.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A problem at a specific line (1-based, the header is line 1).
    #[error("{}:{line}: {message}", path.display())]
    Line {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A problem with a file as a whole.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
}

/// A feed row.
#[derive(Clone, Debug)]
pub struct FeedRow {
    /// External id.
    pub id: String,
    /// Importance weight (≥ 0).
    pub weight: f64,
    /// Optional politeness group.
    pub host: Option<String>,
}

/// An access event: user, feed (`None` = app-level, all subscriptions), time.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    /// Dense user index.
    pub user: u32,
    /// Dense feed index, or `None` for an app-level access.
    pub feed: Option<u32>,
    /// Seconds from the trace start.
    pub ts: f64,
}

/// A loaded trace with dense ids.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Feeds in file order.
    pub feeds: Vec<FeedRow>,
    /// Posting times per feed, sorted.
    pub postings: Vec<Vec<f64>>,
    /// User ids and weights in file order.
    pub users: Vec<(String, f64)>,
    /// Subscribed feeds per user.
    pub subscriptions: Vec<Vec<u32>>,
    /// Access events in time order.
    pub accesses: Vec<Access>,
    /// Latest timestamp seen in postings or accesses.
    pub end_ts: f64,
}

/// The dense index of `id`, or an error naming the file (`feeds.csv`/`users.csv`) it is
/// missing from.
fn lookup(ix: &IdMap, kind: &str, path: &Path, line: u64, id: &str) -> Result<u32, TraceError> {
    ix.get(id).copied().ok_or_else(|| {
        line_err(
            path,
            line,
            format!("unknown {kind}_id `{id}` (not in {kind}s.csv)"),
        )
    })
}

fn line_err(path: &Path, line: u64, message: String) -> TraceError {
    TraceError::Line {
        path: path.to_path_buf(),
        line,
        message,
    }
}

fn parse_weight(path: &Path, line: u64, v: &str) -> Result<f64, TraceError> {
    match v.parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(line_err(
            path,
            line,
            format!("weight `{v}` is not a non-negative number"),
        )),
    }
}

/// The latest time a trace may hold, in days from its start (ten years). Times are seconds
/// from the trace's first midnight; a trace written in Unix time would otherwise read as
/// 56 years whose first 20,000 days hold nothing, and `replay` would run through every one
/// of them.
pub const MAX_TRACE_DAYS: f64 = 3_653.0;

fn parse_ts(path: &Path, line: u64, v: &str) -> Result<f64, TraceError> {
    let ts = v
        .parse::<f64>()
        .map_err(|_| line_err(path, line, format!("timestamp `{v}` is not a number")))?;
    if !ts.is_finite() || ts < 0.0 {
        return Err(line_err(
            path,
            line,
            format!("timestamp `{v}` must be a finite number ≥ 0"),
        ));
    }
    if ts >= MAX_TRACE_DAYS * DAY_S {
        // Unix seconds of any date from 2001 to 5138 are in [10⁹, 10¹¹); in milliseconds, ×1,000.
        let hint = if (1e9..1e11).contains(&ts) {
            " (it reads as Unix time: subtract the first day's midnight)"
        } else if (1e12..1e14).contains(&ts) {
            " (it reads as Unix time in milliseconds: subtract the first day's midnight and \
             divide by 1,000)"
        } else {
            ""
        };
        // The parsed value, not the row's text (which may be megabytes of zeros); very large
        // ones in exponent form.
        let (shown, days) = if ts < 1e15 {
            (format!("{ts:.0}"), format!("{:.0}", (ts / DAY_S).floor()))
        } else {
            (format!("{ts:e}"), format!("{:.3e}", ts / DAY_S))
        };
        return Err(line_err(
            path,
            line,
            format!(
                "timestamp `{shown}` is {days} days after the trace start; times are seconds \
                 from the trace's first midnight, at most {MAX_TRACE_DAYS} days{hint}"
            ),
        ));
    }
    Ok(ts)
}

impl Trace {
    /// Loads and validates a trace folder, parsing on every core (see `rows`).
    pub fn load(dir: &Path) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        let mut feed_ix: IdMap = IdMap::default();
        read_rows(
            dir,
            "feeds.csv",
            &["feed_id", "weight"],
            &["host"],
            |path, line, v| {
                if v[0].is_empty() {
                    return Err(line_err(path, line, "empty feed_id".into()));
                }
                let weight = parse_weight(path, line, v[1])?;
                let host = v.get(2).filter(|h| !h.is_empty()).map(|h| h.to_string());
                Ok(FeedRow {
                    id: v[0].to_string(),
                    weight,
                    host,
                })
            },
            |path, line, row| {
                if feed_ix
                    .insert(row.id.as_str().into(), t.feeds.len() as u32)
                    .is_some()
                {
                    return Err(line_err(
                        path,
                        line,
                        format!("duplicate feed_id `{}`", row.id),
                    ));
                }
                t.feeds.push(row);
                Ok(())
            },
        )?;
        if t.feeds.is_empty() {
            return Err(TraceError::File {
                path: dir.join("feeds.csv"),
                message: "the trace has no feeds".into(),
            });
        }
        let lookup_feed =
            |path: &Path, line: u64, id: &str| lookup(&feed_ix, "feed", path, line, id);
        t.postings = vec![Vec::new(); t.feeds.len()];
        let mut count = 0usize;
        read_rows(
            dir,
            "postings.csv",
            &["feed_id", "ts"],
            &[],
            |path, line, v| Ok((lookup_feed(path, line, v[0])?, parse_ts(path, line, v[1])?)),
            |_, _, (fi, ts)| {
                t.postings[fi as usize].push(ts);
                count += 1;
                Ok(())
            },
        )?;
        if count == 0 {
            return Err(TraceError::File {
                path: dir.join("postings.csv"),
                message: "the trace has no postings".into(),
            });
        }
        // Rows may come in any order (an export from a database need not be sorted); each
        // feed's postings are put in time order here.
        for p in &mut t.postings {
            if !p.is_sorted() {
                p.sort_unstable_by(f64::total_cmp);
            }
        }
        t.end_ts = t
            .postings
            .iter()
            .filter_map(|p| p.last().copied())
            .fold(0.0, f64::max);

        if !dir.join("users.csv").exists()
            && !dir.join("accesses.csv").exists()
            && !dir.join("subscriptions.csv").exists()
        {
            return Ok(t);
        }
        let mut user_ix: IdMap = IdMap::default();
        read_rows(
            dir,
            "users.csv",
            &["user_id", "weight"],
            &[],
            |path, line, v| Ok((v[0].to_string(), parse_weight(path, line, v[1])?)),
            |path, line, (id, weight)| {
                if id.is_empty()
                    || user_ix
                        .insert(id.as_str().into(), t.users.len() as u32)
                        .is_some()
                {
                    return Err(line_err(
                        path,
                        line,
                        format!("empty or duplicate user_id `{id}`"),
                    ));
                }
                t.users.push((id, weight));
                Ok(())
            },
        )?;
        let lookup_user =
            |path: &Path, line: u64, id: &str| lookup(&user_ix, "user", path, line, id);
        t.subscriptions = vec![Vec::new(); t.users.len()];
        read_rows(
            dir,
            "subscriptions.csv",
            &["user_id", "feed_id"],
            &[],
            |path, line, v| {
                Ok((
                    lookup_user(path, line, v[0])?,
                    lookup_feed(path, line, v[1])?,
                ))
            },
            |_, _, (u, fi)| {
                t.subscriptions[u as usize].push(fi);
                Ok(())
            },
        )?;
        for s in &mut t.subscriptions {
            s.sort_unstable();
            s.dedup();
        }
        read_rows(
            dir,
            "accesses.csv",
            &["user_id", "feed_id", "ts"],
            &[],
            |path, line, v| {
                let user = lookup_user(path, line, v[0])?;
                let feed = if v[1].is_empty() {
                    None
                } else {
                    Some(lookup_feed(path, line, v[1])?)
                };
                Ok(Access {
                    user,
                    feed,
                    ts: parse_ts(path, line, v[2])?,
                })
            },
            |_, _, a| {
                t.accesses.push(a);
                Ok(())
            },
        )?;
        // In time order, rows of one instant in file order.
        if !t.accesses.is_sorted_by(|a, b| a.ts <= b.ts) {
            t.accesses.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        }
        let last_access = t.accesses.last().map_or(0.0, |a| a.ts);
        t.end_ts = t.end_ts.max(last_access);
        Ok(t)
    }

    /// Index of a feed id.
    pub fn feed_index(&self, id: &str) -> Option<usize> {
        self.feeds.iter().position(|f| f.id == id)
    }
}
