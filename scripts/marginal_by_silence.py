#!/usr/bin/env python3
"""What one more fetch is worth, by how long a feed had been silent, from a fetch log.

For each feed and each day from FROM_DAY on, the feed-day is put in a class by the days
since the feed's last posting before that day (posted the day before, 1–2 silent days, 3–6,
7–13, 14 or more, never). Per class the script prints the feed-days, the postings, postings
and fetches per feed-day, fetches over the square root of the postings' rate (constant
across classes under the square-root rule, were the rates the same within each class), the
average wait of the class's postings (until the feed's next fetch, minutes) and the
marginal worth of a fetch: the feed-day's summed wait over its fetches, averaged over the
class's feed-days. A wait that falls as one over the fetches (W = c / f) loses W / f to one
more fetch, so at the best allocation this last column is the same in every class; where it
is lower, fetches would do more elsewhere. It is a first-order reading of one run, not a
plan: it ignores the hours of the day and how fetches of one day change the next.

usage: scripts/marginal_by_silence.py TRACE_DIR FETCH_LOG [FROM_DAY]
  FETCH_LOG is `replay --fetch-log`'s CSV (feed_id, ts in seconds of the trace).
"""
import bisect
import collections
import csv
import math
import sys

from trace_io import by_feed

DAY = 86400.0
CLASSES = [(0, "posted the day before"), (2, "1-2 days silent"), (6, "3-6"), (13, "7-13"),
           (10**9 - 1, "14 or more"), (10**9, "never")]


def main():
    trace, log = sys.argv[1], sys.argv[2]
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 14
    posts = by_feed(f"{trace}/postings.csv")
    fetches = by_feed(log)
    with open(f"{trace}/feeds.csv", newline="") as f:
        feeds = [row["feed_id"] if "feed_id" in row else row["id"] for row in csv.DictReader(f)]
    last = int(max(t for ts in posts.values() for t in ts) // DAY)
    # per class: feed-days, postings, fetches, summed wait (min), summed wait over fetches
    acc = collections.defaultdict(lambda: [0, 0, 0, 0.0, 0.0])
    for feed in feeds:
        p, q = posts.get(feed, []), fetches.get(feed, [])
        for d in range(first, last + 1):
            i = bisect.bisect_left(p, d * DAY)
            silent = 10**9 if i == 0 else d - int(p[i - 1] // DAY) - 1
            name = next(n for limit, n in CLASSES if silent <= limit)
            today = p[i:bisect.bisect_left(p, (d + 1) * DAY)]
            n_fetch = bisect.bisect_left(q, (d + 1) * DAY) - bisect.bisect_left(q, d * DAY)
            wait = 0.0
            for t in today:
                j = bisect.bisect_left(q, t)
                if j < len(q):
                    wait += (q[j] - t) / 60.0
            a = acc[name]
            a[0] += 1
            a[1] += len(today)
            a[2] += n_fetch
            a[3] += wait
            a[4] += wait / max(n_fetch, 1)
    print("| days since the last posting | feed-days | postings | postings / feed-day "
          "| fetches / feed-day | fetches / √rate | wait (min) | worth of one more fetch "
          "(posting-min) |")
    print("|---|---|---|---|---|---|---|---|")
    for _, name in CLASSES:
        if name not in acc:
            continue
        n, k, f, w, m = acc[name]
        rate, per = k / n, f / n
        ratio = f"{per / math.sqrt(rate):.2f}" if rate > 0 else "-"
        mean_wait = f"{w / k:.1f}" if k else "-"
        print(f"| {name} | {n:,} | {k:,} | {rate:.3f} | {per:.2f} | {ratio} | {mean_wait} "
              f"| {m / n:.1f} |")


if __name__ == "__main__":
    main()
