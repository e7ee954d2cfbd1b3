#!/usr/bin/env python3
"""Mean wait of timer feeds' postings and of the other feeds', in two live runs' fetch logs.

A feed counts as on a timer when at least 70% of its postings before day FIRST fall within
one 20-minute window of the day (the window may cross midnight). For each class: feeds,
postings from day FIRST on (those with a fetch after them), the mean wait from posting to
the next fetch in run A and in run B, and the fetches each run made from day FIRST on.
docs/EXPERIMENTS.md "Timer feeds caught up before their window after a replan" is its output.

    scripts/timer_waits.py TRACE_DIR FETCH_LOG_A FETCH_LOG_B [FIRST]

TRACE_DIR holds `postings.csv` (feed_id,ts in seconds); the fetch logs are `replay
--fetch-log`'s (feed_id,ts).
"""

import bisect
import collections
import sys

from trace_io import by_feed

DAY = 86_400.0
WINDOW = 1_200.0
SHARE = 0.7



def on_timer(times):
    tod = sorted(t % DAY for t in times)
    if len(tod) < 4:
        return False
    best = 0
    for i, x in enumerate(tod):
        n = bisect.bisect_right(tod, x + WINDOW) - i
        if x + WINDOW > DAY:
            n += bisect.bisect_right(tod, x + WINDOW - DAY)
        best = max(best, n)
    return best >= SHARE * len(tod)


def main() -> int:
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    trace, log_a, log_b = sys.argv[1:4]
    first = (float(sys.argv[4]) if len(sys.argv) == 5 else 14.0) * DAY
    posts = by_feed(f"{trace}/postings.csv")
    runs = [by_feed(log_a), by_feed(log_b)]
    rows = collections.defaultdict(lambda: {"feeds": 0, "postings": 0, "wait": [0.0, 0.0], "fetches": [0, 0]})
    for feed, ps in posts.items():
        row = rows["timer" if on_timer([t for t in ps if t < first]) else "other"]
        row["feeds"] += 1
        for k, run in enumerate(runs):
            fetches = run.get(feed, [])
            row["fetches"][k] += len(fetches) - bisect.bisect_left(fetches, first)
            for t in ps:
                if t < first:
                    continue
                i = bisect.bisect_left(fetches, t)
                if i < len(fetches):
                    row["wait"][k] += fetches[i] - t
                    row["postings"] += k == 0
    print("| feeds | count | postings | mean wait A (min) | B (min) | fetches A | B |")
    print("|---|---|---|---|---|---|---|")
    for name in ("timer", "other"):
        r = rows[name]
        n = max(r["postings"], 1)
        print(
            f"| {name} | {r['feeds']} | {r['postings']} | {r['wait'][0] / 60 / n:.2f} | "
            f"{r['wait'][1] / 60 / n:.2f} | {r['fetches'][0]} | {r['fetches'][1]} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
