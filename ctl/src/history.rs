//! `kairosctl history export DIR`: the posting history the coordinator has learned, written
//! as a trace folder (DESIGN.md §6) that `kairos-coordinator replay` reads, so an operator
//! can ask of their own feeds what their current reader's scheduler would give and what
//! Kairos gives (`replay --peers all`).
//!
//! What it holds: every registered feed (`feeds.csv`, with its host for the politeness cap)
//! and the postings of the learning window (`postings.csv`), from the first midnight (UTC)
//! at or after the earliest time any feed was watched; `feeds-meta.csv` beside them says
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
    start_unix_ms: i64,
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
    let (feeds, now_ms) = all_history(admin).await?;
    let w = write_trace(&dir, &feeds, now_ms)?;
    print(
        out,
        json!({
            "dir": dir.display().to_string(),
            "feeds": w.feeds,
            "feeds_watched": w.watched,
            "postings": w.postings,
            "undated_postings": w.undated,
            "postings_before_start": w.before_start,
            "start_unix_ms": w.start_unix_ms,
            "days": w.days,
        }),
        || {
            format!(
                "{} feeds ({} watched), {} postings ({} undated, placed mid-interval) over {:.1} days \
                 from {} written to {}; {} postings before that midnight left out\n",
                w.feeds,
                w.watched,
                w.postings,
                w.undated,
                w.days,
                chrono::DateTime::from_timestamp_millis(w.start_unix_ms)
                    .map_or_else(|| w.start_unix_ms.to_string(), |t| t.to_rfc3339()),
                dir.display(),
                w.before_start,
            )
        },
    );
    Ok(())
}

/// Every feed's history, paged, and the coordinator's clock at the last page.
async fn all_history(admin: &mut Admin) -> Result<(Vec<pb::FeedHistory>, i64), Failure> {
    let mut all = Vec::new();
    let mut after = String::new();
    let mut now_ms = 0;
    loop {
        let page = admin
            .list_feed_history(pb::ListFeedHistoryRequest {
                after_feed_id: after.clone(),
                limit: 1000,
            })
            .await
            .map_err(|s| Failure::from_status("listing the feeds' history", s))?
            .into_inner();
        now_ms = now_ms.max(page.now_unix_ms);
        let Some(last) = page.feeds.last() else { break };
        after = last.feed_id.clone();
        all.extend(page.feeds);
    }
    Ok((all, now_ms))
}

/// The trace's time 0: the first midnight (UTC) at or after the earliest watched time, or
/// the midnight before it when that would leave less than a day before `now_ms`.
fn trace_start(feeds: &[pb::FeedHistory], now_ms: i64) -> Option<i64> {
    let earliest = feeds
        .iter()
        .map(|f| f.watched_since_unix_ms)
        .filter(|&t| t > 0)
        .min()?;
    let after =
        earliest.div_euclid(DAY_MS) * DAY_MS + if earliest % DAY_MS == 0 { 0 } else { DAY_MS };
    Some(if now_ms - after >= DAY_MS {
        after
    } else {
        earliest.div_euclid(DAY_MS) * DAY_MS
    })
}

/// Seconds from `start` of a Unix-ms time, as the trace writes them.
fn seconds(t: i64, start: i64) -> String {
    format!("{:.3}", (t - start) as f64 / 1000.0)
}

fn local(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::Local(format!("{}: {e}", path.display()))
}

/// Writes `feeds` under `dir` as a trace; refuses a history without a posting.
fn write_trace(dir: &Path, feeds: &[pb::FeedHistory], now_ms: i64) -> Result<Written, Failure> {
    let start = trace_start(feeds, now_ms).ok_or_else(|| {
        Failure::Local("no feed has been fetched yet: there is no history to export".into())
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
        days: (now_ms - start) as f64 / DAY_MS as f64,
        ..Written::default()
    };
    let kept: usize = feeds
        .iter()
        .map(|f| times(f).iter().filter(|&&t| t >= start).count())
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
    for f in feeds {
        w.feeds += 1;
        fw.write_record([f.feed_id.as_str(), &f.weight.to_string(), f.host.as_str()])
            .map_err(io("feeds.csv"))?;
        let t = times(f);
        let before = t.iter().take_while(|&&t| t < start).count();
        w.before_start += before;
        for &p in &t[before..] {
            pw.write_record([f.feed_id.as_str(), &seconds(p, start)])
                .map_err(io("postings.csv"))?;
        }
        w.postings += t.len() - before;
        w.undated += f.undated_from_unix_ms.len();
        let since = (f.watched_since_unix_ms > 0).then(|| {
            w.watched += 1;
            seconds(f.watched_since_unix_ms.max(start), start)
        });
        mw.write_record([
            f.feed_id.as_str(),
            f.url.as_str(),
            since.as_deref().unwrap_or(""),
            &(t.len() - before).to_string(),
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

    fn feed(id: &str, since: i64, dated: &[i64], undated: &[(i64, i64)]) -> pb::FeedHistory {
        pb::FeedHistory {
            feed_id: id.into(),
            url: format!("http://127.0.0.1/{id}"),
            weight: 1.0,
            host: "127.0.0.1:80".into(),
            watched_since_unix_ms: since,
            posting_unix_ms: dated.to_vec(),
            undated_from_unix_ms: undated.iter().map(|u| u.0).collect(),
            undated_to_unix_ms: undated.iter().map(|u| u.1).collect(),
        }
    }

    #[test]
    fn the_trace_starts_at_the_first_midnight_watched_and_places_undated_postings_mid_interval() {
        let day = DAY_MS;
        // Watched from 10:00 on day 3; now is day 9 at noon.
        let feeds = [
            feed(
                "a,1",
                3 * day + 10 * 3_600_000,
                &[3 * day + 11 * 3_600_000, 5 * day + 1_500],
                &[(6 * day, 6 * day + 7_200_000)],
            ),
            feed("b", 0, &[], &[]),
        ];
        let dir = std::env::temp_dir().join(format!("kairosctl-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = write_trace(&dir, &feeds, 9 * day + day / 2).unwrap();
        assert_eq!(w.start_unix_ms, 4 * day);
        assert_eq!(
            (w.feeds, w.watched, w.postings, w.undated, w.before_start),
            (2, 1, 2, 1, 1)
        );
        assert!((w.days - 5.5).abs() < 1e-9);
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
    fn a_history_without_a_fetch_or_a_posting_is_refused() {
        let dir = std::env::temp_dir().join("kairosctl-history-none");
        let none = [feed("a", 0, &[], &[])];
        assert!(matches!(
            write_trace(&dir, &none, DAY_MS),
            Err(Failure::Local(_))
        ));
        let silent = [feed("a", DAY_MS / 2, &[], &[])];
        assert!(matches!(
            write_trace(&dir, &silent, 3 * DAY_MS),
            Err(Failure::Local(_))
        ));
        assert!(!dir.exists(), "nothing is written for a refused export");
    }

    #[test]
    fn a_history_shorter_than_a_day_after_its_midnight_starts_at_the_midnight_before() {
        let day = DAY_MS;
        let feeds = [feed("a", 2 * day + 3_600_000, &[2 * day + 7_200_000], &[])];
        assert_eq!(trace_start(&feeds, 3 * day + 3_600_000), Some(2 * day));
        assert_eq!(trace_start(&feeds, 4 * day), Some(3 * day));
    }
}
