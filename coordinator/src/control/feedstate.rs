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

use super::cold::{empty_is_default, Cold};
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
    /// Failures, back-off and the publisher's hints; unset (no box) for a healthy feed
    /// without hints ([`super::cold`]). Call `settle` after writing it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub health: Cold<super::health::Health>,
    /// The planned time of the last fetch reported and the worker (name, without its
    /// session number) that made it: a slot reported again by another worker was fetched
    /// twice, around a handover or a failover. Stored with the rest, so a new leader still
    /// sees the old one's last slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_slot: Option<(i64, String)>,
    /// What the last parsed document said of itself ([`super::cold`]: a state learned
    /// from a trace has none).
    #[serde(default)]
    pub meta: Cold<FeedMeta>,
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

empty_is_default!(FeedMeta);

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
        let clip = |s: &str, max: usize| kairos_proto::bounds::prefix(s, max).to_string();
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

    /// Postings a day seen over the feed's watched span in the window ending at `now_ms`
    /// (at least a day): what the store's retention must hold for it.
    pub fn postings_per_day_seen(&self, now_ms: i64, window_ms: i64) -> f64 {
        let since = self
            .observed_since_ms
            .unwrap_or(now_ms)
            .max(now_ms - window_ms);
        let days = ((now_ms - since) as f64 / crate::time::DAY_MS as f64).max(1.0);
        self.observed_postings() as f64 / days
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
#[path = "feedstate_tests.rs"]
mod tests;
