#!/usr/bin/env python3
"""How a scheduler reacts when a fetch finds a posting, by how quiet the feed had been.

For every posting on the scored days (from FROM_DAY to three days before the trace ends)
that starts a clump (no posting of its feed in the hour before), the feed is classed by its
postings in the 14 days before (0, 1–2, 3–6, 7 or more). For each fetch log given (Kairos'
`replay --fetch-log`, a peer's `--peer-fetch-logs` file) and each class the script prints the
postings, how long the posting waited for the fetch that found it (hours), the fetches of
the feed in the three days before the posting and in the three days after that find, the
feed's postings in those three days after, their average wait (minutes) and their summed
wait (thousands of posting-minutes). A scheduler that halves its interval on a find
(StormCrawler's) fetches more after it; whether that pays is what
scripts/day_follow_up_headroom.py prices.

usage: scripts/find_reaction.py TRACE_DIR FROM_DAY FETCH_LOG [FETCH_LOG...]
"""
import bisect
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from trace_io import by_feed  # noqa: E402

DAY = 86400.0
CLASSES = ["0", "1-2", "3-6", "7+"]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    trace, from_day, logs = sys.argv[1], float(sys.argv[2]) * DAY, sys.argv[3:]
    postings = by_feed(f"{trace}/postings.csv")
    if not any(postings.values()):
        sys.exit(f"no postings in {trace}/postings.csv")
    end = max(max(v) for v in postings.values() if v)
    for log in logs:
        fetches = by_feed(log)
        rows = [[0, 0.0, 0.0, 0.0, 0, 0.0] for _ in CLASSES]
        for feed, ts in postings.items():
            fs = fetches.get(feed, [])
            for i, t in enumerate(ts):
                if t < from_day or t > end - 3 * DAY or (i > 0 and ts[i - 1] > t - 3600):
                    continue
                k = bisect.bisect_left(ts, t - 3600) - bisect.bisect_left(ts, t - 14 * DAY)
                c = 0 if k == 0 else 1 if k <= 2 else 2 if k <= 6 else 3
                j = bisect.bisect_left(fs, t)
                if j >= len(fs):
                    continue
                find = fs[j]
                a, b = bisect.bisect_right(ts, find), bisect.bisect_right(ts, find + 3 * DAY)
                wait = 0.0
                for p in ts[a:b]:
                    q = bisect.bisect_left(fs, p)
                    wait += (fs[q] - p) if q < len(fs) else 0.0
                r = rows[c]
                r[0] += 1
                r[1] += (find - t) / 3600
                r[2] += j - bisect.bisect_left(fs, t - 3 * DAY)
                r[3] += bisect.bisect_right(fs, find + 3 * DAY) - j - 1
                r[4] += b - a
                r[5] += wait / 60
        print(log)
        print("| postings in the 14 days before | clump starts | first wait (h) | fetches 3 d "
              "before | fetches 3 d after the find | postings 3 d after | their wait (min) "
              "| their summed wait (k posting-min) |")
        print("|---|---|---|---|---|---|---|---|")
        for name, (n, first, before, after, later, wait) in zip(CLASSES, rows):
            if n:
                print(f"| {name} | {n} | {first / n:.1f} | {before / n:.2f} | {after / n:.2f} | "
                      f"{later / n:.2f} | {wait / max(later, 1):.1f} | {wait / 1000:.1f} |")


if __name__ == "__main__":
    main()
