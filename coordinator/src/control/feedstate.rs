//! Per-feed runtime state kept by the coordinator and persisted as the feed's learned
//! record: cache validators, recently seen item ids (handed to a feed's next owner so a
//! host move does not re-report old items), and the posting observations relearning uses.
//!
//! **Which posting times are trusted.** A feed's claimed publication date is trusted for the
//! realized-delay measure only when it falls between the previous fetch and the discovering
//! one: anything earlier was published before we were looking (or is a back-dated item), and
//! anything later is a clock problem of the publisher. For *learning*, a trusted date counts
//! at that date, and so does every dated item of a feed's first document (it shows days of
//! history); an undated or untrusted item found later is known only to have appeared between
//! the two fetches, so its mass is spread evenly over that interval. Undated items of a first
//! document have no interval at all and teach nothing about timing.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Item ids remembered per feed (a document rarely carries more).
pub const RECENT_ITEMS: usize = 256;
/// Posting times remembered per feed for learning.
pub const MAX_OBSERVATIONS: usize = 4096;
/// Blind spans a feed keeps at most ([`FeedState::blind_ms`]): one per overflowed fetch in
/// the window; beyond it the oldest go (and count as watched again).
pub const MAX_BLIND_SPANS: usize = 256;
/// Back-dated new items one fetch may always count (see [`FeedState::observe`]).
pub const BACKDATED_MIN: usize = 5;

/// One fetch as the coordinator learns from it.
#[derive(Clone, Debug, Default)]
pub struct FetchObservation {
    /// When the fetch finished (discovery time of its new items), Unix ms.
    pub finished_ms: i64,
    /// Whether the server answered with a document or a 304 (else the fetch failed and
    /// says nothing about postings).
    pub answered: bool,
    /// New validators, if the server sent any.
    pub etag: Option<String>,
    /// New `Last-Modified`, if any.
    pub last_modified: Option<String>,
    /// Items ingested for the first time: id hash and claimed publication time.
    pub new_items: Vec<(u64, Option<i64>)>,
    /// Items the document held (0 when unknown).
    pub items_in_document: usize,
}

/// What one observation changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Delays (ms) of new items whose publication time is trusted.
    pub trusted_delays_ms: Vec<i64>,
    /// Whether the learning inputs changed (a posting was added or the window moved).
    pub model_changed: bool,
    /// Whether every item of the document was new after an earlier answered fetch: postings
    /// may have scrolled off the document between the two fetches.
    pub overflowed: bool,
    /// New items dated before the previous fetch beyond what one fetch may count (a flood
    /// of back-dated items): stored, but not counted as postings of the interval.
    pub backdated_ignored: usize,
}

/// Fields at their default are left out of the stored state: on etcd every byte of it is
/// paid once per feed (docs/STATE.md).
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Runtime and learned state of one feed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedState {
    /// Last `ETag`.
    pub etag: String,
    /// Last `Last-Modified`.
    pub last_modified: String,
    /// Item ids seen most recently, oldest first.
    #[serde(with = "super::packed::ids")]
    pub recent_items: VecDeque<u64>,
    /// Start of the span over which `postings_ms` is complete, Unix ms.
    pub observed_since_ms: Option<i64>,
    /// Last fetch the server answered, Unix ms.
    pub last_answered_ms: Option<i64>,
    /// The answered fetch before that one: what a split report's further parts (more
    /// postings of the last fetch) are judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_before_ms: Option<i64>,
    /// Posting times inside the learning window, ascending.
    #[serde(with = "super::packed::times")]
    pub postings_ms: VecDeque<i64>,
    /// Postings known only to have appeared within `(from, to]`, by `to` ascending.
    #[serde(
        default,
        with = "super::packed::spans",
        skip_serializing_if = "VecDeque::is_empty"
    )]
    pub spread_ms: VecDeque<(i64, i64)>,
    /// Spans in which postings may have gone unseen: from a fetch to the oldest item the
    /// next one's document still held, when that document held only new items (it had
    /// overflowed). The models do not count them as watched ([`FeedState::blind_within`]).
    #[serde(
        default,
        with = "super::packed::spans",
        skip_serializing_if = "VecDeque::is_empty"
    )]
    pub blind_ms: VecDeque<(i64, i64)>,
    /// Answered fetches.
    pub fetches: u64,
    /// New items counted per answered fetch, a moving average (weight 0.1 on the latest):
    /// what bounds a flood of back-dated items.
    #[serde(default)]
    pub usual_new: f32,
    /// Most items one document of the feed has held (0 until known).
    #[serde(default)]
    pub doc_capacity: u32,
    /// Fetches whose document held only new items after an earlier answered fetch.
    #[serde(default, skip_serializing_if = "is_default")]
    pub overflows: u32,
    /// Failures, back-off and the publisher's hints.
    #[serde(default, skip_serializing_if = "is_default")]
    pub health: super::health::Health,
    /// The planned time of the last fetch reported and the worker (name, without its
    /// session number) that made it: a slot reported again by another worker was fetched
    /// twice, around a handover or a failover. Stored with the rest, so a new leader still
    /// sees the old one's last slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_slot: Option<(i64, String)>,
    /// What the last parsed document said of itself.
    #[serde(default)]
    pub meta: FeedMeta,
}

/// A feed's own description, from its last parsed document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FeedMeta {
    /// The feed's title.
    pub title: String,
    /// The site it belongs to.
    pub site_url: String,
    /// Format and version as written (`rss-2.0`, `atom-0.3`, ...).
    pub format: String,
    /// The WebSub hubs it named (W3C WebSub §4), in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hubs: Vec<String>,
    /// The topic URL it named as `self`, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub topic: String,
}

impl FeedMeta {
    /// Longest title and URL kept: a report is input, and a feed's state is stored.
    const MAX_TITLE: usize = 512;
    const MAX_URL: usize = 2048;

    /// The description a report carries, if any (reports of fetches that read no document
    /// carry none and leave the last one standing).
    pub fn of_report(r: &kairos_proto::v1::FetchReport) -> Option<FeedMeta> {
        let (title, site_url, format) = (&r.feed_title, &r.site_url, &r.format);
        if format.is_empty() {
            return None;
        }
        let clip = |s: &str, max: usize| {
            let mut end = s.len().min(max);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s[..end].to_string()
        };
        Some(FeedMeta {
            title: clip(title, Self::MAX_TITLE),
            site_url: clip(site_url, Self::MAX_URL),
            format: clip(format, 32),
            // Bounded by the report's own checks (`kairos_proto::bounds`); a URL is not cut.
            hubs: r
                .websub_hubs
                .iter()
                .filter(|h| h.len() <= Self::MAX_URL)
                .take(kairos_proto::bounds::MAX_WEBSUB_HUBS)
                .cloned()
                .collect(),
            topic: if r.websub_topic.len() <= Self::MAX_URL {
                r.websub_topic.clone()
            } else {
                String::new()
            },
        })
    }
}

impl FeedState {
    /// Records that `worker` fetched the slot planned at `planned_ms`; true when another
    /// worker had reported that same slot last. First-sight and catch-up fetches are timed
    /// by the worker's own clock, so only a slot both workers had in their plans repeats.
    pub fn record_slot(&mut self, planned_ms: i64, worker: &str) -> bool {
        if planned_ms <= 0 {
            return false;
        }
        let name = super::cluster::name_of(worker);
        let twice = matches!(&self.last_slot, Some((t, w)) if *t == planned_ms && w != name);
        if !matches!(&self.last_slot, Some((t, w)) if *t == planned_ms && w == name) {
            self.last_slot = Some((planned_ms, name.to_string()));
        }
        twice
    }

    /// Folds one fetch into the state. `window_ms` is the learning window's length.
    pub fn observe(&mut self, o: &FetchObservation, window_ms: i64) -> Observed {
        let mut out = Observed::default();
        if !o.answered {
            return out;
        }
        let window_start = o.finished_ms - window_ms;
        let previous = self.last_answered_ms;
        if let Some(e) = &o.etag {
            self.etag = e.clone();
        }
        if let Some(l) = &o.last_modified {
            self.last_modified = l.clone();
        }
        let mut times = Vec::with_capacity(o.new_items.len());
        let mut spread = Vec::new();
        // New items dated before the previous fetch claim to be older than what was seen
        // then: a few are late publications, a flood of them is an import or a re-dated
        // archive. At most twice the feed's usual new items per fetch (5 at least) count.
        let mut backdated_left = (2.0 * self.usual_new as f64)
            .ceil()
            .max(BACKDATED_MIN as f64) as usize;
        for &(id, published) in &o.new_items {
            self.recent_items.push_back(id);
            let trusted = matches!((previous, published),
                (Some(prev), Some(p)) if p > prev && p <= o.finished_ms);
            if trusted {
                out.trusted_delays_ms
                    .push(o.finished_ms - published.expect("trusted has a date"));
            }
            match (published, previous) {
                (Some(p), _) if p <= o.finished_ms && (trusted || previous.is_none()) => {
                    if p >= window_start {
                        times.push(p);
                    }
                }
                (Some(p), Some(prev)) if p <= prev => {
                    if backdated_left > 0 {
                        backdated_left -= 1;
                        spread.push((prev.max(window_start), o.finished_ms));
                    } else {
                        out.backdated_ignored += 1;
                    }
                }
                (_, Some(prev)) => spread.push((prev.max(window_start), o.finished_ms)),
                // Undated history of a first document: no interval to place it in.
                (_, None) => {}
            }
        }
        while self.recent_items.len() > RECENT_ITEMS {
            self.recent_items.pop_front();
        }
        let counted = (times.len() + spread.len()) as f32;
        self.usual_new = if previous.is_none() {
            counted
        } else {
            0.9 * self.usual_new + 0.1 * counted
        };
        if self.observed_since_ms.is_none() {
            // The first document shows history back to its oldest dated item (clamped to
            // the window below).
            let oldest = o
                .new_items
                .iter()
                .filter_map(|&(_, p)| p.filter(|&p| p <= o.finished_ms))
                .min()
                .unwrap_or(o.finished_ms);
            self.observed_since_ms = Some(oldest.max(window_start));
        }
        if !times.is_empty() {
            out.model_changed = true;
            let mut all: Vec<i64> = self.postings_ms.drain(..).chain(times).collect();
            all.sort_unstable();
            self.postings_ms = all.into();
        }
        if !spread.is_empty() {
            out.model_changed = true;
            // Finish times only grow, so appending keeps the order.
            self.spread_ms.extend(spread);
        }
        while self.postings_ms.front().is_some_and(|&t| t < window_start) {
            self.postings_ms.pop_front();
            out.model_changed = true;
        }
        while self
            .spread_ms
            .front()
            .is_some_and(|&(_, to)| to < window_start)
        {
            self.spread_ms.pop_front();
            out.model_changed = true;
        }
        for s in self.spread_ms.iter_mut() {
            s.0 = s.0.max(window_start);
        }
        while self
            .blind_ms
            .front()
            .is_some_and(|&(_, to)| to <= window_start)
        {
            self.blind_ms.pop_front();
            out.model_changed = true;
        }
        for s in self.blind_ms.iter_mut() {
            s.0 = s.0.max(window_start);
        }
        while self.postings_ms.len() + self.spread_ms.len() > MAX_OBSERVATIONS {
            // Drop the oldest observation of either kind; the span starts after it.
            let point = self.postings_ms.front().copied();
            let interval = self.spread_ms.front().map(|&(_, to)| to);
            let dropped = match (point, interval) {
                (Some(p), Some(i)) if i < p => self.spread_ms.pop_front().map(|(_, to)| to),
                (Some(_), _) => self.postings_ms.pop_front(),
                (None, _) => self.spread_ms.pop_front().map(|(_, to)| to),
            };
            self.observed_since_ms = dropped.or(self.observed_since_ms);
        }
        if let Some(since) = self.observed_since_ms.as_mut() {
            *since = (*since).max(window_start);
        }
        if o.items_in_document > 0 {
            let n = o.items_in_document.min(u32::MAX as usize) as u32;
            self.doc_capacity = self.doc_capacity.max(n);
            if let Some(prev) = previous.filter(|_| o.new_items.len() >= o.items_in_document) {
                self.overflows = self.overflows.saturating_add(1);
                out.overflowed = true;
                // The document reaches back to its oldest item: what came between the
                // previous fetch and that item may have scrolled off. Counted as watched,
                // that time would say the feed posted nothing then, and a busy feed whose
                // document overflows would be learned slower than it posts, planned fewer
                // fetches, and overflow more. Only when every new item is dated after the
                // previous fetch: an older one shows the document reached back past it
                // (nothing lost), an undated one leaves its reach unknown.
                let dates: Option<Vec<i64>> = o
                    .new_items
                    .iter()
                    .map(|&(_, p)| p.filter(|&p| p > prev && p <= o.finished_ms))
                    .collect();
                let from = prev.max(window_start);
                if let Some(oldest) = dates.and_then(|d| d.into_iter().min()) {
                    if oldest > from {
                        self.blind_ms.push_back((from, oldest));
                        while self.blind_ms.len() > MAX_BLIND_SPANS {
                            self.blind_ms.pop_front();
                        }
                        out.model_changed = true;
                    }
                }
            }
        }
        self.answered_before_ms = previous;
        self.last_answered_ms = Some(o.finished_ms);
        self.fetches += 1;
        out
    }

    /// Folds in more new postings of the last fetch (a report split over messages): judged
    /// against the fetch before it, as if they had come with the first part, without
    /// counting a second fetch. Parts of a fetch this state never saw answered are judged
    /// against the last answered fetch, and move nothing else.
    pub fn observe_more(&mut self, o: &FetchObservation, window_ms: i64) -> Observed {
        if !o.answered {
            return Observed::default();
        }
        let same_fetch = self.last_answered_ms == Some(o.finished_ms);
        let kept = (
            self.last_answered_ms,
            self.answered_before_ms,
            self.fetches,
            self.etag.clone(),
            self.last_modified.clone(),
            self.doc_capacity,
            self.overflows,
        );
        if same_fetch {
            self.last_answered_ms = self.answered_before_ms;
        }
        let part = FetchObservation {
            etag: None,
            last_modified: None,
            items_in_document: 0,
            ..o.clone()
        };
        let out = self.observe(&part, window_ms);
        (
            self.last_answered_ms,
            self.answered_before_ms,
            self.fetches,
            self.etag,
            self.last_modified,
            self.doc_capacity,
            self.overflows,
        ) = kept;
        if same_fetch && kept.1.is_none() {
            // More of a first document: its history reaches back to its oldest dated item.
            let window_start = o.finished_ms - window_ms;
            let oldest = o
                .new_items
                .iter()
                .filter_map(|&(_, p)| p.filter(|&p| p <= o.finished_ms))
                .min();
            if let (Some(oldest), Some(since)) = (oldest, self.observed_since_ms.as_mut()) {
                *since = (*since).min(oldest.max(window_start));
            }
        }
        Observed {
            overflowed: false,
            ..out
        }
    }

    /// Folds in new postings a WebSub hub pushed (received at `o.finished_ms`): each is
    /// placed at its date when that is plausible (not after its arrival, not more than a
    /// day before it), else at its arrival; no fetch is counted and the validators, the
    /// answered times and the document's capacity stay as the polls left them. A posting
    /// dated after the last poll has a trusted delay: its arrival less its date.
    pub fn observe_pushed(&mut self, o: &FetchObservation, window_ms: i64) -> Observed {
        let mut out = Observed::default();
        let window_start = o.finished_ms - window_ms;
        let mut times = Vec::with_capacity(o.new_items.len());
        for &(id, published) in &o.new_items {
            self.recent_items.push_back(id);
            let dated =
                published.filter(|&p| p <= o.finished_ms && p > o.finished_ms - PUSH_DATE_SLACK_MS);
            if let Some(p) = dated.filter(|&p| self.last_answered_ms.is_none_or(|l| p > l)) {
                out.trusted_delays_ms.push(o.finished_ms - p);
            }
            let t = dated.unwrap_or(o.finished_ms);
            if t >= window_start {
                times.push(t);
            }
        }
        while self.recent_items.len() > RECENT_ITEMS {
            self.recent_items.pop_front();
        }
        if !times.is_empty() {
            out.model_changed = true;
            let mut all: Vec<i64> = self.postings_ms.drain(..).chain(times).collect();
            all.sort_unstable();
            self.postings_ms = all.into();
            while self.postings_ms.len() + self.spread_ms.len() > MAX_OBSERVATIONS {
                if self.postings_ms.pop_front().is_none() {
                    break;
                }
            }
        }
        out
    }

    /// Postings observed in the learning window (dated and spread).
    pub fn observed_postings(&self) -> usize {
        self.postings_ms.len() + self.spread_ms.len()
    }

    /// Observed span in ms: from the start of the observations to the last answered fetch
    /// (capped at `now_ms`; 0 before the first answer). Postings published since the last
    /// fetch cannot have been seen yet, so the time after it is not observed: counting it
    /// would read the hours since the last fetch as quiet ones, and a plan that then avoids
    /// those hours would never see them.
    pub fn observed_span_ms(&self, now_ms: i64) -> i64 {
        match (self.observed_since_ms, self.observed_until_ms(now_ms)) {
            (Some(s), Some(u)) => (u - s).max(0),
            _ => 0,
        }
    }

    /// End of the observed span: the last answered fetch, capped at `now_ms`.
    pub fn observed_until_ms(&self, now_ms: i64) -> Option<i64> {
        self.last_answered_ms.map(|a| a.min(now_ms))
    }

    /// The spans within `[from, to)` in which postings may have scrolled off unseen
    /// ([`FeedState::blind_ms`]), clipped to it: time the feed was not watched.
    pub fn blind_within(&self, from: i64, to: i64) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.blind_ms
            .iter()
            .map(move |&(a, b)| (a.max(from), b.min(to)))
            .filter(|&(a, b)| a < b)
    }
}

/// How far before its arrival a pushed posting's date is believed ([`FeedState::observe_pushed`]).
const PUSH_DATE_SLACK_MS: i64 = 86_400_000;

#[cfg(test)]
mod tests {
    #[test]
    fn a_split_report_teaches_what_the_whole_one_would() {
        use super::*;
        let day = 86_400_000i64;
        let items = |from: u64, n: u64, at: i64| -> Vec<(u64, Option<i64>)> {
            (from..from + n)
                .map(|i| {
                    (
                        i,
                        if i % 3 == 0 {
                            None
                        } else {
                            Some(at - i as i64 * 60_000)
                        },
                    )
                })
                .collect()
        };
        let fetch = |t: i64, new_items: Vec<(u64, Option<i64>)>| FetchObservation {
            finished_ms: t,
            answered: true,
            etag: Some(format!("e{t}")),
            new_items,
            items_in_document: 40,
            ..Default::default()
        };
        for first_split in [false, true] {
            let (t1, t2) = (10 * day, 10 * day + 3_600_000);
            let mut whole = FeedState::default();
            let mut split = FeedState::default();
            let mut delays_whole = Vec::new();
            let mut delays_split = Vec::new();
            delays_whole.extend(
                whole
                    .observe(&fetch(t1, items(100, 30, t1)), 14 * day)
                    .trusted_delays_ms,
            );
            if first_split {
                delays_split.extend(
                    split
                        .observe(&fetch(t1, items(100, 10, t1)), 14 * day)
                        .trusted_delays_ms,
                );
                delays_split.extend(
                    split
                        .observe_more(&fetch(t1, items(110, 20, t1)), 14 * day)
                        .trusted_delays_ms,
                );
            } else {
                delays_split.extend(
                    split
                        .observe(&fetch(t1, items(100, 30, t1)), 14 * day)
                        .trusted_delays_ms,
                );
            }
            // The second fetch finds 12 items from the last 50 minutes: trusted delays.
            delays_whole.extend(
                whole
                    .observe(&fetch(t2, items(0, 12, t2)), 14 * day)
                    .trusted_delays_ms,
            );
            delays_split.extend(
                split
                    .observe(&fetch(t2, items(0, 5, t2)), 14 * day)
                    .trusted_delays_ms,
            );
            delays_split.extend(
                split
                    .observe_more(&fetch(t2, items(5, 7, t2)), 14 * day)
                    .trusted_delays_ms,
            );
            assert!(!delays_whole.is_empty());
            assert_eq!(delays_split, delays_whole);
            let mut a = split.postings_ms.clone();
            a.make_contiguous().sort_unstable();
            assert_eq!(a, whole.postings_ms);
            assert_eq!(split.spread_ms, whole.spread_ms);
            assert_eq!(split.fetches, 2, "parts are not fetches");
            assert_eq!(split.last_answered_ms, Some(t2));
            assert_eq!(split.observed_since_ms, whole.observed_since_ms);
            assert_eq!(split.etag, whole.etag);
            let (mut x, mut y): (Vec<u64>, Vec<u64>) = (
                split.recent_items.iter().copied().collect(),
                whole.recent_items.iter().copied().collect(),
            );
            x.sort_unstable();
            y.sort_unstable();
            assert_eq!(x, y);
        }
    }

    #[test]
    fn a_slot_counts_twice_only_when_another_worker_reports_it() {
        let mut st = FeedState::default();
        assert!(!st.record_slot(1_000, "w1#1"));
        // The same worker again (a resent report, a later session): not a second fetch.
        assert!(!st.record_slot(1_000, "w1#2"));
        assert!(st.record_slot(1_000, "w2#1"), "w2 fetched w1's slot");
        assert!(
            !st.record_slot(2_000, "w1#2"),
            "the next slot, by the old owner"
        );
        assert!(!st.record_slot(0, "w2#1"), "no planned time: not a slot");
        assert!(st.record_slot(2_000, "w2#1"));
    }

    use super::*;

    const H: i64 = 3_600_000;

    fn fetch(at: i64, items: &[(u64, Option<i64>)]) -> FetchObservation {
        FetchObservation {
            finished_ms: at,
            answered: true,
            etag: Some(format!("e{at}")),
            last_modified: None,
            new_items: items.to_vec(),
            items_in_document: 0,
        }
    }

    #[test]
    fn first_document_gives_history_later_ones_give_trusted_delays() {
        let mut s = FeedState::default();
        let day = 24 * H;
        let now = 100 * day;
        // First fetch: three dated items over the last two days, one older than the window.
        let o = s.observe(
            &fetch(
                now,
                &[
                    (1, Some(now - 2 * day)),
                    (2, Some(now - H)),
                    (3, Some(now - 30 * day)),
                ],
            ),
            14 * day,
        );
        assert!(o.trusted_delays_ms.is_empty(), "nothing was watched yet");
        assert!(o.model_changed);
        assert_eq!(s.postings_ms, vec![now - 2 * day, now - H]);
        assert_eq!(s.observed_since_ms, Some(now - 14 * day));
        assert_eq!(s.etag, format!("e{now}"));
        // Next fetch: one item posted in between (trusted), one back-dated, one undated.
        let t = now + 2 * H;
        let o = s.observe(
            &fetch(t, &[(4, Some(now + H)), (5, Some(now - 5 * H)), (6, None)]),
            14 * day,
        );
        assert_eq!(o.trusted_delays_ms, vec![H]);
        assert_eq!(s.postings_ms, vec![now - 2 * day, now - H, now + H]);
        assert_eq!(
            s.spread_ms,
            vec![(now, t), (now, t)],
            "untrusted and undated items are spread between the fetches"
        );
        assert_eq!(s.observed_postings(), 5);
        assert_eq!(s.recent_items.len(), 6);
        // A failed fetch changes nothing.
        let before = s.clone();
        let mut failed = fetch(t + H, &[(7, None)]);
        failed.answered = false;
        assert_eq!(s.observe(&failed, 14 * day), Observed::default());
        assert_eq!(s, before);
    }

    #[test]
    fn window_slides_and_bounds_hold() {
        let mut s = FeedState::default();
        let day = 24 * H;
        let items: Vec<(u64, Option<i64>)> = (0..300).map(|i| (i, Some(i as i64 * H))).collect();
        s.observe(&fetch(301 * H, &items), 10 * day);
        assert_eq!(s.recent_items.len(), RECENT_ITEMS);
        assert_eq!(s.postings_ms.len(), 239, "only the last ten days count");
        assert!(s.spread_ms.is_empty());
        assert_eq!(s.observed_since_ms, Some(61 * H));
        let o = s.observe(&fetch(320 * H, &[]), 10 * day);
        assert!(o.model_changed, "old postings left the window");
        assert_eq!(s.postings_ms.front(), Some(&(80 * H)));
        assert_eq!(s.observed_span_ms(320 * H), 240 * H);
        assert_eq!(
            s.observed_span_ms(330 * H),
            240 * H,
            "nothing after the last fetch has been observed"
        );
    }

    #[test]
    fn a_document_of_only_new_items_after_a_fetch_is_an_overflow() {
        const DAY: i64 = 86_400_000;
        let mut st = FeedState::default();
        let fetch = |at: i64, ids: std::ops::Range<u64>, held: usize| FetchObservation {
            finished_ms: at,
            answered: true,
            new_items: ids.map(|i| (i, None)).collect(),
            items_in_document: held,
            ..Default::default()
        };
        // The first document is all new by nature: not an overflow.
        assert!(!st.observe(&fetch(1_000, 0..20, 20), DAY).overflowed);
        assert_eq!(st.doc_capacity, 20);
        // Five new items among twenty: fine.
        assert!(!st.observe(&fetch(2_000, 20..25, 20), DAY).overflowed);
        // Twenty new of twenty: some may have scrolled off in between.
        assert!(st.observe(&fetch(3_000, 25..45, 20), DAY).overflowed);
        assert_eq!(st.overflows, 1);
        // A 304 (nothing held) says nothing.
        assert!(!st.observe(&fetch(4_000, 0..0, 0), DAY).overflowed);
        // Undated items: how far back the document reached is unknown, so no span is left
        // out of what was watched.
        assert!(st.blind_ms.is_empty());
    }

    #[test]
    fn an_overflowed_document_leaves_the_time_before_its_oldest_item_unwatched() {
        const H: i64 = 3_600_000;
        const WINDOW: i64 = 10 * 24 * H;
        let mut st = FeedState::default();
        let dated = |at: i64, ids: std::ops::Range<u64>, first_ms: i64| FetchObservation {
            finished_ms: at,
            answered: true,
            // One item an hour from `first_ms`, ten to a document.
            new_items: ids
                .enumerate()
                .map(|(k, i)| (i, Some(first_ms + k as i64 * H)))
                .collect(),
            items_in_document: 10,
            ..Default::default()
        };
        st.observe(&dated(100 * H, 0..10, 90 * H), WINDOW);
        // Ten new of ten, the oldest posted at 140 h: what came in (100 h, 140 h) may have
        // scrolled off.
        let o = st.observe(&dated(150 * H, 10..20, 140 * H), WINDOW);
        assert!(o.overflowed && o.model_changed);
        assert_eq!(st.blind_ms, VecDeque::from([(100 * H, 140 * H)]));
        assert_eq!(
            st.blind_within(120 * H, 200 * H).collect::<Vec<_>>(),
            vec![(120 * H, 140 * H)]
        );
        // A full document whose oldest item is older than the previous fetch reached back
        // past it: nothing was lost.
        let mut reaching = dated(160 * H, 20..30, 145 * H);
        reaching.new_items[0].1 = Some(149 * H);
        reaching.new_items[1].1 = Some(120 * H);
        assert!(st.observe(&reaching, WINDOW).overflowed);
        assert_eq!(st.blind_ms.len(), 1);
        // An undated item leaves the document's reach unknown: no span either.
        let mut undated = dated(170 * H, 30..40, 160 * H + 1);
        undated.new_items[3].1 = None;
        assert!(st.observe(&undated, WINDOW).overflowed);
        assert_eq!(st.blind_ms.len(), 1);
        // The span leaves with the window.
        st.observe(&dated(345 * H, 40..41, 344 * H), WINDOW);
        assert_eq!(st.blind_ms, VecDeque::from([(105 * H, 140 * H)]));
        st.observe(&dated(381 * H, 41..42, 380 * H), WINDOW);
        assert!(st.blind_ms.is_empty());
    }

    #[test]
    fn the_stored_state_is_compact_round_trips_and_reads_older_json() {
        use super::*;
        let now = 1_795_000_000_000i64;
        let mut st = FeedState {
            etag: "\"5f3c-1a2b\"".into(),
            last_modified: "Wed, 25 Nov 2026 10:00:00 GMT".into(),
            recent_items: (0..40u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect(),
            observed_since_ms: Some(now - 28 * 86_400_000),
            last_answered_ms: Some(now),
            answered_before_ms: Some(now - 6 * 3_600_000),
            postings_ms: (0..28).map(|i| now - (27 - i) * 86_400_000).collect(),
            fetches: 112,
            usual_new: 0.25,
            doc_capacity: 40,
            last_slot: Some((now, "worker-1".into())),
            meta: FeedMeta {
                title: "A feed".into(),
                site_url: "https://example.org/".into(),
                format: "rss-2.0".into(),
                ..FeedMeta::default()
            },
            ..FeedState::default()
        };
        let quiet = serde_json::to_vec(&st).unwrap();
        assert_eq!(serde_json::from_slice::<FeedState>(&quiet).unwrap(), st);
        // A healthy feed stores no health, spread or overflow fields: 28 days of a posting
        // a day and 40 item ids take under 1,000 bytes (1,862 as plain JSON).
        let text = String::from_utf8_lossy(&quiet);
        assert!(
            !text.contains("health") && !text.contains("spread"),
            "{text}"
        );
        assert!(quiet.len() < 1_000, "{} B: {text}", quiet.len());
        st.health.consecutive_failures = 3;
        st.health.last_error = "timeout".into();
        st.spread_ms.push_back((now - 1000, now));
        st.overflows = 2;
        let busy = serde_json::to_vec(&st).unwrap();
        assert_eq!(serde_json::from_slice::<FeedState>(&busy).unwrap(), st);
        // As versions before the packed lists wrote it.
        let old = r#"{"etag":"e","last_modified":"","recent_items":[1,2],
            "observed_since_ms":10,"last_answered_ms":20,"postings_ms":[11,15],
            "spread_ms":[[12,20]],"fetches":3,"health":{"consecutive_failures":1,
            "last_error":"x","last_failure_ms":null,"malformed_since_ms":null,
            "gone_since_ms":null,"hints":{"max_age_s":0,"ttl_s":0,"update_period_s":0,
            "skip_hours":0,"skip_days":0}}}"#;
        let old: FeedState = serde_json::from_str(old).unwrap();
        assert_eq!(old.recent_items, [1, 2]);
        assert_eq!(old.postings_ms, [11, 15]);
        assert_eq!(old.spread_ms, [(12, 20)]);
        assert_eq!(old.health.consecutive_failures, 1);
    }
}
