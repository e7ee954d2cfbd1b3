//! Loading a trace folder (`DESIGN.md` §6) with errors that name the file and line.
//!
//! Files: `feeds.csv` (`feed_id,weight[,host]`), `postings.csv` (`feed_id,ts`),
//! `users.csv` (`user_id,weight`), `subscriptions.csv` (`user_id,feed_id`), `accesses.csv`
//! (`user_id,feed_id,ts`, empty `feed_id` = app-level access). Times are seconds from the
//! trace start (midnight of day 0). `users.csv`, `subscriptions.csv` and `accesses.csv` may
//! be absent together (a posting-only trace); `host` is an optional extension used by the
//! per-host politeness cap.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

struct CsvFile {
    path: PathBuf,
    reader: csv::Reader<std::fs::File>,
    columns: Vec<usize>,
}

impl CsvFile {
    fn open(dir: &Path, name: &str, required: &[&str]) -> Result<Self, TraceError> {
        let path = dir.join(name);
        let file = std::fs::File::open(&path).map_err(|source| TraceError::Io {
            path: path.clone(),
            source,
        })?;
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(file);
        let headers = reader
            .headers()
            .map_err(|e| TraceError::Line {
                path: path.clone(),
                line: 1,
                message: format!("unreadable header: {e}"),
            })?
            .clone();
        let mut columns = Vec::new();
        for want in required {
            match headers.iter().position(|h| h == *want) {
                Some(i) => columns.push(i),
                None => {
                    return Err(TraceError::Line {
                        path,
                        line: 1,
                        message: format!(
                            "missing column `{want}` (header: {})",
                            headers.iter().collect::<Vec<_>>().join(",")
                        ),
                    })
                }
            }
        }
        Ok(CsvFile {
            path,
            reader,
            columns,
        })
    }

    /// Visits each record as (line, fields in `required` order).
    fn for_each(
        mut self,
        mut f: impl FnMut(&Path, u64, &[&str]) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        let mut rec = csv::StringRecord::new();
        loop {
            let line = self.reader.position().line() + 1;
            match self.reader.read_record(&mut rec) {
                Ok(false) => return Ok(()),
                Ok(true) => {}
                Err(e) => {
                    return Err(TraceError::Line {
                        path: self.path.clone(),
                        line,
                        message: format!("unreadable row: {e}"),
                    })
                }
            }
            let line = rec.position().map(|p| p.line()).unwrap_or(line);
            let mut fields: Vec<&str> = Vec::with_capacity(self.columns.len());
            for &c in &self.columns {
                match rec.get(c) {
                    Some(v) => fields.push(v),
                    None => {
                        return Err(TraceError::Line {
                            path: self.path.clone(),
                            line,
                            message: format!(
                                "expected at least {} fields, found {}",
                                c + 1,
                                rec.len()
                            ),
                        })
                    }
                }
            }
            f(&self.path, line, &fields)?;
        }
    }
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

fn parse_ts(path: &Path, line: u64, v: &str, prev: f64) -> Result<f64, TraceError> {
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
    if ts < prev {
        return Err(line_err(path, line, format!("timestamp {ts} is earlier than the previous row's {prev}: rows must be sorted by time")));
    }
    Ok(ts)
}

impl Trace {
    /// Loads and validates a trace folder.
    pub fn load(dir: &Path) -> Result<Trace, TraceError> {
        let mut t = Trace::default();
        let mut feed_ix: HashMap<String, u32> = HashMap::new();
        let mut f = CsvFile::open(dir, "feeds.csv", &["feed_id", "weight"])?;
        let host_col = f
            .reader
            .headers()
            .ok()
            .and_then(|h| h.iter().position(|c| c == "host"));
        if let Some(c) = host_col {
            f.columns.push(c);
        }
        f.for_each(|path, line, v| {
            if v[0].is_empty() {
                return Err(line_err(path, line, "empty feed_id".into()));
            }
            let weight = parse_weight(path, line, v[1])?;
            if feed_ix
                .insert(v[0].to_string(), t.feeds.len() as u32)
                .is_some()
            {
                return Err(line_err(
                    path,
                    line,
                    format!("duplicate feed_id `{}`", v[0]),
                ));
            }
            let host = v.get(2).filter(|h| !h.is_empty()).map(|h| h.to_string());
            t.feeds.push(FeedRow {
                id: v[0].to_string(),
                weight,
                host,
            });
            Ok(())
        })?;
        if t.feeds.is_empty() {
            return Err(TraceError::File {
                path: dir.join("feeds.csv"),
                message: "the trace has no feeds".into(),
            });
        }
        t.postings = vec![Vec::new(); t.feeds.len()];
        let mut prev = 0.0;
        let mut count = 0usize;
        CsvFile::open(dir, "postings.csv", &["feed_id", "ts"])?.for_each(|path, line, v| {
            let Some(&fi) = feed_ix.get(v[0]) else {
                return Err(line_err(
                    path,
                    line,
                    format!("unknown feed_id `{}` (not in feeds.csv)", v[0]),
                ));
            };
            let ts = parse_ts(path, line, v[1], prev)?;
            prev = ts;
            t.postings[fi as usize].push(ts);
            count += 1;
            Ok(())
        })?;
        if count == 0 {
            return Err(TraceError::File {
                path: dir.join("postings.csv"),
                message: "the trace has no postings".into(),
            });
        }
        t.end_ts = prev;

        if !dir.join("users.csv").exists()
            && !dir.join("accesses.csv").exists()
            && !dir.join("subscriptions.csv").exists()
        {
            return Ok(t);
        }
        let mut user_ix: HashMap<String, u32> = HashMap::new();
        CsvFile::open(dir, "users.csv", &["user_id", "weight"])?.for_each(|path, line, v| {
            let weight = parse_weight(path, line, v[1])?;
            if v[0].is_empty()
                || user_ix
                    .insert(v[0].to_string(), t.users.len() as u32)
                    .is_some()
            {
                return Err(line_err(
                    path,
                    line,
                    format!("empty or duplicate user_id `{}`", v[0]),
                ));
            }
            t.users.push((v[0].to_string(), weight));
            Ok(())
        })?;
        t.subscriptions = vec![Vec::new(); t.users.len()];
        let lookup_user = |path: &Path, line: u64, id: &str, users: &HashMap<String, u32>| {
            users.get(id).copied().ok_or_else(|| {
                line_err(
                    path,
                    line,
                    format!("unknown user_id `{id}` (not in users.csv)"),
                )
            })
        };
        CsvFile::open(dir, "subscriptions.csv", &["user_id", "feed_id"])?.for_each(
            |path, line, v| {
                let u = lookup_user(path, line, v[0], &user_ix)?;
                let Some(&fi) = feed_ix.get(v[1]) else {
                    return Err(line_err(
                        path,
                        line,
                        format!("unknown feed_id `{}` (not in feeds.csv)", v[1]),
                    ));
                };
                t.subscriptions[u as usize].push(fi);
                Ok(())
            },
        )?;
        for s in &mut t.subscriptions {
            s.sort_unstable();
            s.dedup();
        }
        let mut prev = 0.0;
        CsvFile::open(dir, "accesses.csv", &["user_id", "feed_id", "ts"])?.for_each(
            |path, line, v| {
                let user = lookup_user(path, line, v[0], &user_ix)?;
                let feed = if v[1].is_empty() {
                    None
                } else {
                    match feed_ix.get(v[1]) {
                        Some(&f) => Some(f),
                        None => {
                            return Err(line_err(
                                path,
                                line,
                                format!("unknown feed_id `{}` (not in feeds.csv)", v[1]),
                            ))
                        }
                    }
                };
                let ts = parse_ts(path, line, v[2], prev)?;
                prev = ts;
                t.accesses.push(Access { user, feed, ts });
                Ok(())
            },
        )?;
        t.end_ts = t.end_ts.max(prev);
        Ok(t)
    }

    /// Index of a feed id.
    pub fn feed_index(&self, id: &str) -> Option<usize> {
        self.feeds.iter().position(|f| f.id == id)
    }
}
