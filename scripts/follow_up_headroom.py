#!/usr/bin/env python3
"""What a follow-up fetch after a clump in progress would win, offline, on a fetch log.

Postings of a clump (a burst of a synthetic trace, a push of commits) land within an hour
or so; a fetch that finds the first of them finds a feed likely to post again soon. The
plans do not react to that beyond the event-driven update of the feed's model. This script
takes a live run's fetch log (`replay --fetch-log`) and adds, after every fetch on the
scored days that found at least MIN_FOUND new postings the latest of which is at most W
minutes old, one more fetch D minutes later (unless a planned fetch comes sooner); a
follow-up may itself trigger another. Every posting waits until the first fetch at or after
it (a posting no fetch finds waits until a day after the scored days end). It prints the
average wait without and with the follow-ups, the follow-ups added, and the
posting-minutes each saves, beside the posting-minutes an average fetch of the run is
worth (the summed wait over the fetches: under a plan whose delays fall as one over a
feed's fetches, what one more or one fewer fetch moves).

usage: scripts/follow_up_headroom.py TRACE_DIR FETCH_LOG FROM_DAY TO_DAY
"""
import bisect
import heapq
import sys

from trace_io import by_feed

DAY = 86400.0


def summed_wait(postings, fetches, start, end):
    total, n = 0.0, 0
    for p in postings:
        if start <= p < end:
            i = bisect.bisect_left(fetches, p)
            total += (fetches[i] - p) if i < len(fetches) else (end + DAY - p)
            n += 1
    return total, n


def with_follow_ups(postings, fetches, start, end, window, delay, min_found,
                    max_prior=float("inf")):
    """The fetches with follow-ups: after a fetch on the scored days that found at least
    `min_found` new postings, the newest at most `window` seconds old, on a feed with at
    most `max_prior` postings in the 14 days before them, one more `delay` seconds later
    unless a fetch comes sooner. Returns the fetches and how many were added."""
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
        if b - a >= max(min_found, 1) and t - postings[b - 1] <= window and start <= t < end:
            prior = a - bisect.bisect_left(postings, t - 14 * DAY)
            if prior <= max_prior and (not queue or queue[0] > t + delay):
                heapq.heappush(queue, t + delay)
                added += 1
    return made, added


def baseline(postings, fetches, start, end):
    """The log's summed wait (seconds), postings and fetches on the scored days."""
    base, n, scored = 0.0, 0, 0
    for feed, times in fetches.items():
        w, k = summed_wait(postings.get(feed, []), times, start, end)
        base, n = base + w, n + k
        scored += sum(1 for t in times if start <= t < end)
    if n == 0 or scored == 0:
        sys.exit("no postings or no fetches on the scored days")
    return base, n, scored


def load_run(usage):
    """TRACE_DIR FETCH_LOG FROM_DAY TO_DAY from the command line: the postings and fetches
    per feed, and the scored days' bounds in seconds."""
    if len(sys.argv) != 5:
        sys.exit(usage)
    trace, log = sys.argv[1], sys.argv[2]
    start, end = float(sys.argv[3]) * DAY, float(sys.argv[4]) * DAY
    postings, fetches = by_feed(f"{trace}/postings.csv"), by_feed(log)
    return postings, fetches, start, end


def main():
    postings, fetches, start, end = load_run(__doc__)
    base, n, scored_fetches = baseline(postings, fetches, start, end)
    print(f"{n} postings, {scored_fetches} fetches on the scored days; average wait "
          f"{base / n / 60:.2f} min; an average fetch is worth {base / 60 / scored_fetches:.0f} "
          f"posting-min")
    for window in (30, 60, 120):
        for delay in (30, 60):
            for min_found in (1, 2):
                total, added = 0.0, 0
                for feed, times in fetches.items():
                    ps = postings.get(feed, [])
                    made, a = with_follow_ups(ps, times, start, end, window * 60, delay * 60,
                                              min_found)
                    total += summed_wait(ps, made, start, end)[0]
                    added += a
                print(f"  W {window:3d} min, D {delay:2d} min, found >= {min_found}: "
                      f"{total / n / 60:8.2f} min ({total / base:.3f}), {added} follow-ups "
                      f"({100 * added / scored_fetches:.1f}% more fetches), "
                      f"{(base - total) / 60 / max(added, 1):.0f} posting-min each")


if __name__ == "__main__":
    main()
