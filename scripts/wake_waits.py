#!/usr/bin/env python3
"""What feeds waking from silence cost in live runs, and the gaps that broke a week's floor.

For each `replay --fetch-log` file of one trace: the postings from day FROM_DAY on, their
mean wait until the next fetch of their feed, and the share of postings and of that wait
taken by postings that landed after a feed woke (its previous posting at least QUIET_DAYS
earlier, or none and the posting at least QUIET_DAYS into the trace) and before the first
fetch after that wake. Then the gaps between two fetches of one feed longer than a week
(7.05 days) that end within the trace (the last posting's day, rounded up): `replay`'s
default minimum is once a week. docs/EXPERIMENTS.md "Startstop at half a fetch a day: one
feed's wake, and overdue feeds a replan kept moving later" is its output.

usage: scripts/wake_waits.py TRACE_DIR QUIET_DAYS FROM_DAY FETCH_LOG...

TRACE_DIR holds `postings.csv` (feed_id,ts in seconds); the fetch logs are `replay
--fetch-log`'s (feed_id,ts).
"""

import bisect
import math
import sys

from trace_io import by_feed

DAY = 86_400.0
WEEK_GAP = 7.05 * DAY



def report(posts, fetches, quiet, first, end):
    total = waking = 0.0
    n = n_waking = wakes = 0
    for feed, ps in posts.items():
        fs = fetches.get(feed, [])
        prev = None
        detect = None
        for t in ps:
            woke = (t - prev >= quiet) if prev is not None else (t >= quiet)
            if woke:
                i = bisect.bisect_left(fs, t)
                detect = fs[i] if i < len(fs) else None
                wakes += t >= first
            prev = t
            if t < first:
                continue
            i = bisect.bisect_left(fs, t)
            if i == len(fs):
                continue
            wait = fs[i] - t
            total += wait
            n += 1
            if detect is not None and fs[i] <= detect:
                waking += wait
                n_waking += 1
    long = [
        (b - a) / DAY
        for fs in fetches.values()
        for a, b in zip(fs, fs[1:])
        if b - a > WEEK_GAP and b < end
    ]
    return n, total, n_waking, waking, wakes, long


def main() -> int:
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    trace = sys.argv[1]
    quiet = float(sys.argv[2]) * DAY
    first = float(sys.argv[3]) * DAY
    posts = by_feed(f"{trace}/postings.csv")
    last = max((ps[-1] for ps in posts.values() if ps), default=0.0)
    end = math.ceil(last / DAY) * DAY
    print("| fetch log | postings | mean wait (min) | waking postings | their share of the wait | wakes | gaps over a week | longest (days) |")
    print("|---|---|---|---|---|---|---|---|")
    for log in sys.argv[4:]:
        n, total, nw, waking, wakes, long = report(posts, by_feed(log), quiet, first, end)
        mean = total / 60 / max(n, 1)
        share = waking / total if total > 0 else 0.0
        longest = f"{max(long):.2f}" if long else "-"
        print(
            f"| {log} | {n} | {mean:.1f} | {nw} ({nw / max(n, 1):.1%}) | {share:.1%} | {wakes} | {len(long)} | {longest} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
