//! Each peer's rule for the time to its next fetch of a feed, from what that aggregator sees
//! after a fetch: the document's items and their dates, whether it changed (a 304
//! otherwise), the items it has stored from earlier fetches, and the feed's subscribers.
//!
//! Every rule follows the file named in its doc comment; the constants are the shipped
//! defaults. [`Knobs`] scale a rule's settings in two groups: `fast` multiplies the ones
//! that set how often a busy feed is fetched (minimum intervals, TTLs, Miniflux's
//! frequency factor, NewsBlur's rows for feeds that post), `slow` the ones for quiet feeds
//! (maximum and starting intervals, NewsBlur's row for silent feeds and its caps).
//! `Knobs::DEFAULT` is the product as shipped; the tuned runs search them for a budget.

use crate::time::DAY_S as DAY;

/// Seconds in a minute, an hour and a day.
const MIN: f64 = 60.0;
const HOUR: f64 = 3_600.0;

/// What the aggregator knows right after a fetch.
#[derive(Clone, Copy, Debug)]
pub struct FetchView<'a> {
    /// The fetch's time, seconds.
    pub now: f64,
    /// The dates of the document's items, oldest first.
    pub document: &'a [f64],
    /// The dates of every item stored from this feed so far (this fetch's included),
    /// oldest first. An item that scrolled off the document before any fetch is not here.
    pub stored: &'a [f64],
    /// The document differs from the previous fetch's (false: a 304 Not Modified).
    pub modified: bool,
    /// This is the feed's first fetch.
    pub first: bool,
    /// Readers subscribed to the feed.
    pub subscribers: usize,
    /// A number in `[0, 1)` drawn for this fetch, for rules that add jitter.
    pub draw: f64,
}

impl FetchView<'_> {
    /// Stored items dated in `[now − window, now]`.
    fn stored_within(&self, window: f64) -> &[f64] {
        let lo = self.stored.partition_point(|&t| t < self.now - window);
        let hi = self.stored.partition_point(|&t| t <= self.now);
        &self.stored[lo..hi]
    }
}

/// Multipliers on a rule's interval settings (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    /// Multiplier on the settings for busy feeds.
    pub fast: f64,
    /// Multiplier on the settings for quiet feeds.
    pub slow: f64,
}

impl Knobs {
    /// The shipped settings.
    pub const DEFAULT: Knobs = Knobs {
        fast: 1.0,
        slow: 1.0,
    };

    /// Both groups times `s`.
    pub fn uniform(s: f64) -> Knobs {
        Knobs { fast: s, slow: s }
    }
}

/// Per-feed memory of an adaptive rule (Nutch, StormCrawler): its current interval.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleState {
    /// Current interval, seconds; 0 before the first fetch.
    pub interval: f64,
}

/// Miniflux's `entry_frequency` scheduler (`internal/model/feed.go`,
/// `Feed.ScheduleNextCheck`; the weekly count is `internal/storage/feed.go`,
/// `WeeklyFeedEntryCount`). The weekly count is a week divided by the mean gap between
/// the stored entries published in the last week, rounded up (0 with fewer than two, or
/// when they share one date). The interval is a week over that count, clamped to
/// `[SCHEDULER_ENTRY_FREQUENCY_MIN_INTERVAL, …_MAX_INTERVAL]` (5 min, 24 h), or the
/// maximum with a count of 0.
pub fn miniflux_entry_frequency(v: &FetchView, k: Knobs) -> f64 {
    let (min, max) = (5.0 * MIN * k.fast, 24.0 * HOUR * k.slow);
    let week = 7.0 * DAY;
    let recent = v.stored_within(week);
    let weekly = match recent {
        [first, .., last] if last > first => {
            let gap = (last - first) / (recent.len() - 1) as f64;
            (week / gap).ceil()
        }
        _ => 0.0,
    };
    if weekly <= 0.0 {
        return max;
    }
    // `SCHEDULER_ENTRY_FREQUENCY_FACTOR` (1, scaled as 1/fast); whole minutes.
    let minutes = (week / MIN / weekly * k.fast).round() * MIN;
    minutes.max(min).min(max)
}

/// Miniflux's `round_robin` scheduler (`internal/model/feed.go`): every feed again after
/// `SCHEDULER_ROUND_ROBIN_MIN_INTERVAL` (60 min), whatever it posts.
pub fn miniflux_round_robin(_: &FetchView, k: Knobs) -> f64 {
    60.0 * MIN * k.fast
}

/// CommaFeed's empirical interval
/// (`commafeed-server/src/main/java/com/commafeed/backend/feed/FeedRefreshIntervalCalculator.java`,
/// `computeEmpiricalRefreshInterval`; the average is `FeedUtils.averageTimeBetweenEntries`,
/// the mean gap between the document's entries). With `feed-refresh.interval` = 5 min and
/// `max-interval` = 4 h: the newest entry 30 days old or more → the maximum; 14 days → half
/// of it; 7 days → a quarter; otherwise half the mean gap, clamped to [interval, max/4];
/// no entry or no gap → the maximum. The result is kept within [interval, max].
pub fn commafeed(v: &FetchView, k: Knobs) -> f64 {
    let (interval, max) = (5.0 * MIN * k.fast, 4.0 * HOUR * k.slow);
    let next = match v.document {
        [] => max,
        doc => {
            let newest = doc[doc.len() - 1];
            let days_since = ((v.now - newest) / DAY).floor();
            if days_since >= 30.0 {
                max
            } else if days_since >= 14.0 {
                max / 2.0
            } else if days_since >= 7.0 {
                max / 4.0
            } else if doc.len() >= 2 {
                let mean_gap = (newest - doc[0]) / (doc.len() - 1) as f64;
                (mean_gap / 2.0).min(max / 4.0).max(interval)
            } else {
                max
            }
        }
    };
    next.min(max).max(interval)
}

/// NewsBlur's decay table (`apps/rss_feeds/models.py`, `Feed.get_next_scheduled_update`
/// and `set_next_scheduled_update`). `spd` is the stories of the last 30 days over 30,
/// `subs` the feed's subscribers (every subscriber counted as an active premium one, the
/// table's fastest column). Minutes: spd ≥ 1 → 6 (subs > 10), 15 (subs > 1) or 60;
/// 0 < spd < 1 → 60·(1 − spd) (subs > 1) or 720·(1 − spd); spd = 0 → 360 (subs > 1),
/// 720 (one) or 1,440 (none), times the months since the last story when more than one.
/// Capped at 12 h with a subscriber and 48 h without, then a random quarter added.
pub fn newsblur(v: &FetchView, k: Knobs) -> f64 {
    let spd = v.stored_within(30.0 * DAY).len() as f64 / 30.0;
    let subs = v.subscribers;
    let mut total = if spd >= 1.0 {
        k.fast
            * match subs {
                s if s > 10 => 6.0,
                s if s > 1 => 15.0,
                _ => 60.0,
            }
    } else if spd > 0.0 {
        k.fast
            * if subs > 1 {
                60.0 - spd * 60.0
            } else {
                720.0 - spd * 720.0
            }
    } else {
        let base = match subs {
            s if s > 1 => 360.0,
            1 => 720.0,
            _ => 1_440.0,
        };
        let months = v
            .stored
            .last()
            .map_or(0.0, |&last| (v.now - last).max(0.0) / (30.0 * DAY));
        k.slow * base * months.max(1.0)
    };
    total = total.min(k.slow * if subs >= 1 { 720.0 } else { 2_880.0 });
    // `random.randint(0, total) / 4`: up to a quarter more, drawn per fetch.
    let jitter = (v.draw * (total + 1.0)).floor() / 4.0;
    (total + jitter) * MIN
}

/// FreshRSS's time to live (`config.default.php`, `ttl_default` = 3,600 s; a feed is
/// refreshed once its last update is older than its TTL): a fixed interval.
pub fn freshrss(_: &FetchView, k: Knobs) -> f64 {
    HOUR * k.fast
}

/// Nutch's adaptive schedule (`src/java/org/apache/nutch/crawl/AdaptiveFetchSchedule.java`,
/// defaults from `conf/nutch-default.xml`): the interval starts at
/// `db.fetch.interval.default` (30 days), shrinks by `dec_rate` (0.2) when the page
/// changed and grows by `inc_rate` (0.4) when it did not (unchanged on the first fetch,
/// whose status is unknown). With `sync_delta` the interval is at least the time since the
/// page was last modified (here the newest item's date, the fetch time for an empty
/// document), and the next fetch counts from `sync_delta_rate` (0.3) of that time before
/// the fetch. Clamped to [60 s, 365 days].
pub fn nutch(v: &FetchView, st: &mut RuleState, k: Knobs) -> f64 {
    let (min, max) = (60.0 * k.fast, (365.0 * DAY * k.slow).max(60.0 * k.fast));
    if st.interval <= 0.0 {
        st.interval = 30.0 * DAY * k.slow;
    }
    let mut interval = st.interval;
    if !v.first {
        interval *= if v.modified { 1.0 - 0.2 } else { 1.0 + 0.4 };
    }
    let modified_at = v.document.last().copied().unwrap_or(v.now).min(v.now);
    let delta = v.now - modified_at;
    if delta > interval {
        interval = delta;
    }
    let reference = v.now - delta * 0.3;
    interval = interval.clamp(min, max);
    st.interval = interval;
    (reference + interval - v.now).max(1.0)
}

/// StormCrawler's adaptive scheduler (`core/src/main/java/com/digitalpebble/stormcrawler/persistence/AdaptiveScheduler.java`):
/// the first fetch schedules the default interval (`fetchInterval.default`, 1,440 min);
/// after that a changed page moves the interval halfway toward the minimum
/// (`fetchInterval.rate.decr` 0.5, `fetchInterval.min` 60 min) and an unchanged one or a
/// 304 multiplies it by 1.5 (`rate.incr` 0.5), up to `fetchInterval.max` (two weeks).
pub fn stormcrawler(v: &FetchView, st: &mut RuleState, k: Knobs) -> f64 {
    let min = 60.0 * MIN * k.fast;
    let (max, default) = (
        (14.0 * DAY * k.slow).max(min),
        (1_440.0 * MIN * k.slow).max(min),
    );
    if v.first || st.interval <= 0.0 {
        st.interval = default;
        return default;
    }
    st.interval = if v.modified {
        0.5 * st.interval + 0.5 * min
    } else {
        (st.interval * 1.5).min(max)
    };
    st.interval
}
