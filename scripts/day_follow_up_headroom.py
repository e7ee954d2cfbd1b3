#!/usr/bin/env python3
"""What a look again hours after a find would win, offline, on a fetch log.

scripts/follow_up_headroom.py prices a follow-up within the hour after a fresh find (a
clump in progress). This one prices the day-scale reaction of StormCrawler's rule: after a
fetch on the scored days that found new postings, on a feed with at most MAX_PRIOR postings
in the 14 days before them and the newest at most AGE old (6 h, or any age), one more fetch
D hours later (6, 12 or 24) unless a planned one comes sooner; a follow-up that finds more
may set another. Each line gives the delay with the follow-ups over the log's own, the
follow-ups' share of the fetches, the posting-minutes each saves, and the net: the share
of the summed wait saved beyond what as many average fetches of the run are worth (every
follow-up would be paid for by a planned fetch).

usage: scripts/day_follow_up_headroom.py TRACE_DIR FETCH_LOG FROM_DAY TO_DAY
"""
import bisect
import heapq
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from follow_up_headroom import by_feed, summed_wait  # noqa: E402

DAY = 86400.0


def with_looks(postings, fetches, start, end, delay, max_prior, age):
    queue = list(fetches)
    heapq.heapify(queue)
    made, added, last = [], 0, -float("inf")
    while queue:
        t = heapq.heappop(queue)
        if made and t <= made[-1]:
            continue
        made.append(t)
        a, b = bisect.bisect_right(postings, last), bisect.bisect_right(postings, t)
        last = t
        if b > a and start <= t < end and t - postings[b - 1] <= age:
            prior = a - bisect.bisect_left(postings, t - 14 * DAY)
            if prior <= max_prior and (not queue or queue[0] > t + delay):
                heapq.heappush(queue, t + delay)
                added += 1
    return made, added


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    trace, log = sys.argv[1], sys.argv[2]
    start, end = float(sys.argv[3]) * DAY, float(sys.argv[4]) * DAY
    postings, fetches = by_feed(f"{trace}/postings.csv"), by_feed(log)
    base, n, scored = 0.0, 0, 0
    for feed, times in fetches.items():
        w, k = summed_wait(postings.get(feed, []), times, start, end)
        base, n = base + w, n + k
        scored += sum(1 for t in times if start <= t < end)
    if n == 0 or scored == 0:
        sys.exit("no postings or no fetches on the scored days")
    worth = base / scored
    print(f"{n} postings, {scored} fetches on the scored days; average wait {base / n / 60:.1f}"
          f" min; an average fetch is worth {worth / 60:.0f} posting-min")
    for max_prior in (2, 6, 14, 10**9):
        for age_name, age in (("6 h", 6 * 3600), ("any", float("inf"))):
            for hours in (6, 12, 24):
                total, added = 0.0, 0
                for feed, times in fetches.items():
                    ps = postings.get(feed, [])
                    made, a = with_looks(ps, times, start, end, hours * 3600, max_prior, age)
                    total += summed_wait(ps, made, start, end)[0]
                    added += a
                net = (base - total - added * worth) / base
                prior = "any" if max_prior >= 10**9 else f"<= {max_prior}"
                print(f"  prior {prior:>6}, age {age_name:>3}, D {hours:2d} h: {total / base:.3f}, "
                      f"{100 * added / scored:.1f}% more fetches, "
                      f"{(base - total) / 60 / max(added, 1):.0f} posting-min each, net {net:+.3f}")


if __name__ == "__main__":
    main()
