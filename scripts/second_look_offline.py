#!/usr/bin/env python3
"""What one extra fetch soon after a fresh find would save, offline, on a fetch log.

usage: scripts/second_look_offline.py TRACE FETCH_LOG [FIRST_DAY]

TRACE is a trace folder (its postings.csv), FETCH_LOG a `replay --fetch-log` file
(feed_id,ts). For each rule (age A, delay D, chain), every fetch on FIRST_DAY or later
whose newest newly found posting is at most A old gets one more fetch D later (unless
the log fetches the feed within D anyway; a second look may take another, up to `chain`
deep). Prints the postings' average delay from FIRST_DAY on without and with them, the
extra fetches, and the posting-minutes each saves: to set against what the budget's
marginal fetch saves (the live delay times the postings over the fetches). Nothing is
taken out of the budget here, so it bounds what a live rule could win.
docs/EXPERIMENTS.md ("A second look after a fresh find") used it.
"""
import bisect
import collections
import heapq
import sys


def load(path, skip_header):
    out = collections.defaultdict(list)
    with open(path) as f:
        for i, line in enumerate(f):
            if (skip_header and i == 0) or not line.strip() or line.startswith("feed"):
                continue
            feed, ts = line.strip().split(",")[:2]
            out[feed].append(float(ts))
    for v in out.values():
        v.sort()
    return out


def run(posts, fetches, start, age, delay, chain):
    base = new = 0.0
    n = extra = 0
    for feed, P in posts.items():
        F = fetches.get(feed, [])
        if not F:
            continue
        heap = [(t, 0) for t in F]
        heapq.heapify(heap)
        last, done = -1e18, []
        while heap:
            t, depth = heapq.heappop(heap)
            found = P[bisect.bisect_right(P, last) : bisect.bisect_right(P, t)]
            done.append(t)
            if found and found[-1] >= t - age and depth < chain and t >= start:
                nxt = bisect.bisect_right(F, t)
                if nxt >= len(F) or F[nxt] > t + delay:
                    heapq.heappush(heap, (t + delay, depth + 1))
                    extra += 1
            last = t
        done.sort()
        for q in P:
            if q < start:
                continue
            i, j = bisect.bisect_left(F, q), bisect.bisect_left(done, q)
            if i < len(F):
                base += F[i] - q
                new += done[j] - q
                n += 1
    return base / max(n, 1) / 60, new / max(n, 1) / 60, n, extra


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    posts = load(sys.argv[1] + "/postings.csv", True)
    fetches = load(sys.argv[2], False)
    start = float(sys.argv[3] if len(sys.argv) > 3 else 14) * 86400
    scored = sum(1 for v in fetches.values() for t in v if t >= start)
    print(f"fetches from day {start / 86400:g}: {scored}")
    for age in (600, 1800, 3600):
        for delay in (1800, 3600, 7200):
            for chain in (1, 3):
                b, a, n, e = run(posts, fetches, start, age, delay, chain)
                print(
                    f"A {age // 60}m D {delay // 60}m chain {chain}: {b:.2f} -> {a:.2f} min "
                    f"({a / b:.3f}), {e} extra ({100 * e / max(scored, 1):.2f}%), "
                    f"{(b - a) * n / max(e, 1):.0f} posting-min each"
                )


if __name__ == "__main__":
    main()
