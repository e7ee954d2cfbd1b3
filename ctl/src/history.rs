//! `kairosctl history export DIR`: the posting history the coordinator has learned, written
//! as a trace folder (DESIGN.md §6) that `kairos-coordinator replay` reads, so an operator
//! can ask of their own feeds what their current reader's scheduler would give and what
//! Kairos gives (`replay --peers all`).
//!
//! What it holds: every registered feed (`feeds.csv`, with its host for the politeness cap)
//! and the postings of the learning window (`postings.csv`) over whole UTC days: from the
//! first midnight at or after the earliest time any feed was watched to the last one after
//! which nearly every posting is known ([`trace_span`]); `feeds-meta.csv` beside them says
//! since when each feed was watched, so a feed added later, silent before, can be told
//! apart. An undated posting (known only to have appeared between two fetches) is placed
//! at the middle of that interval. Reader accesses are not written: the coordinator keeps
//! them as hourly counts, not as events, and `replay` scores delay per posting without
//! them.

use crate::output::{print, Format};
use crate::{Admin, Failure};
use clap::Subcommand;
use kairos_proto::v1 as pb;
use serde_json::json;
use std::path::{Path, PathBuf};

/// History subcommands.
#[derive(Subcommand, Debug)]
pub enum History {
    /// Writes the learned posting history as a trace folder for `replay` (DIR is created;
    /// one that already holds a trace is refused).
    Export { dir: PathBuf },
}

const DAY_MS: i64 = 86_400_000;

/// What one export wrote.
#[derive(Debug, Default, PartialEq)]
struct Written {
    feeds: usize,
    watched: usize,
    postings: usize,
    undated: usize,
    /// Postings before the trace's first midnight (left out).
    before_start: usize,
    /// Postings from its last midnight on (left out: not every feed fetched since).
    after_end: usize,
    start_unix_ms: i64,
    end_unix_ms: i64,
    days: f64,
}

pub async fn run(admin: &mut Admin, out: Format, c: History) -> Result<(), Failure> {
    let History::Export { dir } = c;
    if dir.join("feeds.csv").exists() {
        return Err(Failure::Local(format!(
            "{} already holds a trace (feeds.csv); choose another folder",
            dir.display()
        )));
    }
    let feeds = all_history(admin).await?;
    let w = write_trace(&dir, &feeds)?;
    print(
        out,
        json!({
            "dir": dir.display().to_string(),
            "feeds": w.feeds,
            "feeds_watched": w.watched,
            "postings": w.postings,
            "undated_postings": w.undated,
            "postings_before_start": w.before_start,
            "postings_after_end": w.after_end,
            "start_unix_ms": w.start_unix_ms,
            "end_unix_ms": w.end_unix_ms,
            "days": w.days,
        }),
        || {
            let at = |ms: i64| {
                chrono::DateTime::from_timestamp_millis(ms)
                    .map_or_else(|| ms.to_string(), |t| t.to_rfc3339())
            };
            format!(
                "{} feeds ({} watched), {} postings ({} undated, placed mid-interval) over {:.0} days \
                 from {} to {} written to {}; left out: {} postings before the first midnight, \
                 {} from the last on\n",
                w.feeds,
                w.watched,
                w.postings,
                w.undated,
                w.days,
                at(w.start_unix_ms),
                at(w.end_unix_ms),
                dir.display(),
                w.before_start,
                w.after_end,
            )
        },
    );
    Ok(())
}

/// Every feed's history, paged.
async fn all_history(admin: &mut Admin) -> Result<Vec<pb::FeedHistory>, Failure> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let page = admin
            .list_feed_history(pb::ListFeedHistoryRequest {
                after_feed_id: after.clone(),
                limit: 1000,
            })
            .await
            .map_err(|s| Failure::from_status("listing the feeds' history", s))?
            .into_inner();
        let Some(last) = page.feeds.last() else { break };
        after = last.feed_id.clone();
        all.extend(page.feeds);
    }
    Ok(all)
}

/// The trace's span, whole UTC days. It ends at the last midnight after which the feeds
/// not fetched since (whose later postings are not known yet) hold at most 1% of the
/// window's postings, and starts at the first midnight at or after the earliest time any
/// feed was watched, or the midnight before it when that would leave no whole day. `None`:
/// no whole day yet.
fn trace_span(feeds: &[pb::FeedHistory]) -> Option<(i64, i64)> {
    let watched: Vec<&pb::FeedHistory> = feeds
        .iter()
        .filter(|f| f.watched_since_unix_ms > 0)
        .collect();
    let earliest = watched.iter().map(|f| f.watched_since_unix_ms).min()?;
    let postings = |f: &pb::FeedHistory| f.posting_unix_ms.len() + f.undated_from_unix_ms.len();
    let total: usize = watched.iter().map(|f| postings(f)).sum();
    let floor = earliest.div_euclid(DAY_MS) * DAY_MS;
    let latest = watched.iter().map(|f| f.last_answered_unix_ms).max()?;
    let mut end = latest.div_euclid(DAY_MS) * DAY_MS;
    while end > floor {
        let behind: usize = watched
            .iter()
            .filter(|f| f.last_answered_unix_ms < end)
            .map(|f| postings(f))
            .sum();
        if behind * 100 <= total {
            break;
        }
        end -= DAY_MS;
    }
    let ceil = if earliest == floor {
        floor
    } else {
        floor + DAY_MS
    };
    [ceil, floor]
        .into_iter()
        .find(|&s| end - s >= DAY_MS)
        .map(|s| (s, end))
}

/// Seconds from `start` of a Unix-ms time, as the trace writes them.
fn seconds(t: i64, start: i64) -> String {
    format!("{:.3}", (t - start) as f64 / 1000.0)
}

fn local(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::Local(format!("{}: {e}", path.display()))
}

/// Writes `feeds` under `dir` as a trace; refuses a history without a posting.
fn write_trace(dir: &Path, feeds: &[pb::FeedHistory]) -> Result<Written, Failure> {
    let (start, end) = trace_span(feeds).ok_or_else(|| {
        Failure::Local(
            "no whole day (UTC) has been watched yet, from midnight to midnight with the feeds \
             fetched since: there is no history to export"
                .into(),
        )
    })?;
    // Each posting's time: dated ones as they are, undated ones mid-interval.
    let times = |f: &pb::FeedHistory| -> Vec<i64> {
        let mut t: Vec<i64> = f.posting_unix_ms.clone();
        t.extend(
            f.undated_from_unix_ms
                .iter()
                .zip(&f.undated_to_unix_ms)
                .map(|(&a, &b)| a + (b - a) / 2),
        );
        t.sort_unstable();
        t
    };
    let mut w = Written {
        start_unix_ms: start,
        end_unix_ms: end,
        days: ((end - start) / DAY_MS) as f64,
        ..Written::default()
    };
    // Each feed's times once, for the check and for the files.
    let all: Vec<Vec<i64>> = feeds.iter().map(times).collect();
    let kept: usize = all
        .iter()
        .map(|t| t.iter().filter(|&&t| t >= start && t < end).count())
        .sum();
    if kept == 0 {
        return Err(Failure::Local(
            "no posting has been seen since the trace would start: a trace needs at least one"
                .into(),
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| local(dir, e))?;
    let open = |name: &str| {
        let path = dir.join(name);
        csv::Writer::from_path(&path).map_err(|e| local(&path, e))
    };
    let (mut fw, mut pw, mut mw) = (
        open("feeds.csv")?,
        open("postings.csv")?,
        open("feeds-meta.csv")?,
    );
    let io = |name: &str| {
        let path = dir.join(name);
        move |e: csv::Error| local(&path, e)
    };
    fw.write_record(["feed_id", "weight", "host"])
        .map_err(io("feeds.csv"))?;
    pw.write_record(["feed_id", "ts"])
        .map_err(io("postings.csv"))?;
    mw.write_record(["feed_id", "url", "watched_since_s", "postings", "undated"])
        .map_err(io("feeds-meta.csv"))?;
    for (f, t) in feeds.iter().zip(&all) {
        w.feeds += 1;
        fw.write_record([f.feed_id.as_str(), &f.weight.to_string(), f.host.as_str()])
            .map_err(io("feeds.csv"))?;
        let before = t.iter().take_while(|&&t| t < start).count();
        let inside = t[before..].iter().take_while(|&&t| t < end).count();
        w.before_start += before;
        w.after_end += t.len() - before - inside;
        for &p in &t[before..before + inside] {
            pw.write_record([f.feed_id.as_str(), &seconds(p, start)])
                .map_err(io("postings.csv"))?;
        }
        w.postings += inside;
        w.undated += f.undated_from_unix_ms.len();
        let since = (f.watched_since_unix_ms > 0).then(|| {
            w.watched += 1;
            seconds(f.watched_since_unix_ms.max(start), start)
        });
        mw.write_record([
            f.feed_id.as_str(),
            f.url.as_str(),
            since.as_deref().unwrap_or(""),
            &inside.to_string(),
            &f.undated_from_unix_ms.len().to_string(),
        ])
        .map_err(io("feeds-meta.csv"))?;
    }
    fw.flush().map_err(|e| local(&dir.join("feeds.csv"), e))?;
    pw.flush()
        .map_err(|e| local(&dir.join("postings.csv"), e))?;
    mw.flush()
        .map_err(|e| local(&dir.join("feeds-meta.csv"), e))?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    fn feed(
        id: &str,
        since: i64,
        answered: i64,
        dated: &[i64],
        undated: &[(i64, i64)],
    ) -> pb::FeedHistory {
        pb::FeedHistory {
            feed_id: id.into(),
            url: format!("http://127.0.0.1/{id}"),
            weight: 1.0,
            host: "127.0.0.1:80".into(),
            watched_since_unix_ms: since,
            posting_unix_ms: dated.to_vec(),
            undated_from_unix_ms: undated.iter().map(|u| u.0).collect(),
            undated_to_unix_ms: undated.iter().map(|u| u.1).collect(),
            last_answered_unix_ms: answered,
        }
    }

    #[test]
    fn the_trace_spans_whole_days_watched_and_places_undated_postings_mid_interval() {
        let day = DAY_MS;
        // Watched from 10:00 on day 3, last fetched at 09:00 on day 9: days 4 to 8.
        let feeds = [
            feed(
                "a,1",
                3 * day + 10 * HOUR,
                9 * day + 9 * HOUR,
                &[3 * day + 11 * HOUR, 5 * day + 1_500, 9 * day + HOUR],
                &[(6 * day, 6 * day + 2 * HOUR)],
            ),
            feed("b", 0, 0, &[], &[]),
        ];
        let dir = std::env::temp_dir().join(format!("kairosctl-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = write_trace(&dir, &feeds).unwrap();
        assert_eq!(
            (w.start_unix_ms, w.end_unix_ms, w.days),
            (4 * day, 9 * day, 5.0)
        );
        assert_eq!(
            (
                w.feeds,
                w.watched,
                w.postings,
                w.undated,
                w.before_start,
                w.after_end
            ),
            (2, 1, 2, 1, 1, 1)
        );
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        // The comma in the id is quoted, so the trace reader reads it back whole.
        assert_eq!(
            read("postings.csv"),
            "feed_id,ts\n\"a,1\",86401.500\n\"a,1\",176400.000\n"
        );
        assert_eq!(
            read("feeds.csv"),
            "feed_id,weight,host\n\"a,1\",1,127.0.0.1:80\nb,1,127.0.0.1:80\n"
        );
        assert!(read("feeds-meta.csv").contains("b,http://127.0.0.1/b,,0,0\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_history_without_a_whole_day_or_a_posting_is_refused() {
        let dir = std::env::temp_dir().join(format!("kairosctl-refused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let never = [feed("a", 0, 0, &[], &[])];
        assert!(matches!(write_trace(&dir, &never), Err(Failure::Local(_))));
        // Fetched last before the first midnight after it was first watched.
        let short = [feed(
            "a",
            DAY_MS / 2,
            DAY_MS - HOUR,
            &[DAY_MS / 2 + HOUR],
            &[],
        )];
        assert!(matches!(write_trace(&dir, &short), Err(Failure::Local(_))));
        let silent = [feed("a", DAY_MS / 2, 3 * DAY_MS, &[], &[])];
        assert!(matches!(write_trace(&dir, &silent), Err(Failure::Local(_))));
        assert!(!dir.exists(), "nothing is written for a refused export");
    }

    #[test]
    fn the_span_ends_where_nearly_every_posting_is_known_and_starts_on_a_whole_day() {
        let day = DAY_MS;
        let posting = [HOUR];
        // Feeds holding 1 posting in 100 that were last fetched on day 1 do not hold the
        // end back (nor does a silent one); 2 in 101 do.
        let mut feeds: Vec<pb::FeedHistory> = (0..99)
            .map(|i| feed(&format!("f{i}"), HOUR, 5 * day + 2 * HOUR, &posting, &[]))
            .collect();
        feeds.push(feed("late", HOUR, day + HOUR, &posting, &[]));
        feeds.push(feed("silent", HOUR, day + HOUR, &[], &[]));
        assert_eq!(trace_span(&feeds), Some((day, 5 * day)));
        feeds.push(feed("late2", HOUR, day + HOUR, &posting, &[]));
        assert_eq!(trace_span(&feeds), Some((0, day)));
        // Watched from 01:00 on day 2, fetched until 01:00 on day 3: only the midnight
        // before gives a whole day; until day 4, the midnight after.
        let one = [feed("a", 2 * day + HOUR, 3 * day + HOUR, &[], &[])];
        assert_eq!(trace_span(&one), Some((2 * day, 3 * day)));
        let two = [feed("a", 2 * day + HOUR, 4 * day, &[], &[])];
        assert_eq!(trace_span(&two), Some((3 * day, 4 * day)));
        // Watched from a midnight: that midnight.
        let exact = [feed("a", 2 * day, 3 * day, &[], &[])];
        assert_eq!(trace_span(&exact), Some((2 * day, 3 * day)));
    }
}
