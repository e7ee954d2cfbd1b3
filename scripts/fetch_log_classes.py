#!/usr/bin/env python3
"""Compare two `replay --fetch-log` files of one trace, per class of feed.

Each posting from day FROM_DAY on waits until the first fetch of its feed at or after it
(documents that scroll off are not modelled: this is the plain wait, which is what moves
between two runs). Feeds are grouped by how many postings they have on the scored days
(busy: a posting a day or more; mid: 8 or more; quiet: 1 or more; none) and by whether they
posted before FROM_DAY ("/new": they started on the scored days). For each class the script
prints the feeds, the postings, each run's average wait in minutes, each run's fetches on
the scored days, and the change in posting-minutes (B less A). docs/EXPERIMENTS.md ("Two
populations Kairos was not tuned on") used it to see which feeds a shorter memory helps.

FETCH_LOG_B may be `even`: then B makes A's fetches of each feed on the scored days, as many,
evenly spaced from a random phase (seeded), so B − A is what A's timing within the day is
worth for each class (A's allocation kept, its hours of the day given up).

usage: scripts/fetch_log_classes.py TRACE_DIR FETCH_LOG_A FETCH_LOG_B|even [FROM_DAY]
"""
import bisect
import collections
import random
import sys

from trace_io import by_feed

DAY = 86400.0


def waits(postings, fetches, start):
    """Summed wait (seconds) and count of the postings from `start` that a fetch found."""
    total, found = 0.0, 0
    for p in postings:
        if p < start:
            continue
        i = bisect.bisect_left(fetches, p)
        if i < len(fetches):
            total += fetches[i] - p
            found += 1
    return total, found


def evenly(run, start, end):
    """Each feed's fetches in [start, end) respaced evenly, as many, from a random phase."""
    rng = random.Random(1)
    out = {}
    for feed, times in run.items():
        inside = sum(1 for t in times if start <= t < end)
        gap = (end - start) / max(inside, 1)
        phase = rng.random() * gap
        spaced = [start + phase + i * gap for i in range(inside)]
        out[feed] = sorted([t for t in times if t < start or t >= end] + spaced)
    return out


def main(argv):
    if len(argv) not in (4, 5):
        sys.exit(__doc__)
    trace, log_a, log_b = argv[1:4]
    from_day = float(argv[4]) if len(argv) == 5 else 14.0
    start = from_day * DAY
    postings = by_feed(f"{trace}/postings.csv")
    run_a = by_feed(log_a)
    end = max((t[-1] for t in postings.values() if t), default=start)
    runs = [run_a, evenly(run_a, start, end) if log_b == "even" else by_feed(log_b)]
    scored_days = max((end - start) / DAY, 1.0)
    classes = collections.defaultdict(lambda: [0, 0, 0.0, 0.0, 0, 0])
    for feed in set(postings) | set(runs[0]) | set(runs[1]):
        ps = postings.get(feed, [])
        later = sum(1 for p in ps if p >= start)
        if later >= scored_days:
            name = "busy"
        elif later >= 8:
            name = "mid"
        elif later >= 1:
            name = "quiet"
        else:
            name = "none"
        if not any(p < start for p in ps):
            name += "/new"
        c = classes[name]
        c[0] += 1
        for k, run in enumerate(runs):
            fetches = run.get(feed, [])
            total, found = waits(ps, fetches, start)
            if k == 0:
                c[1] += found
            c[2 + k] += total
            c[4 + k] += sum(1 for t in fetches if start <= t < end)
    print("class        feeds postings   A (min)   B (min)  fetches A  fetches B  B-A (posting-min)")
    for name, c in sorted(classes.items()):
        n = max(c[1], 1)
        print(
            f"{name:12s} {c[0]:5d} {c[1]:8d} {c[2] / n / 60:9.1f} {c[3] / n / 60:9.1f}"
            f" {c[4]:10d} {c[5]:10d} {(c[3] - c[2]) / 60:18.0f}"
        )


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, KeyError, ValueError) as e:
        # A missing file, a CSV without feed_id/ts columns, or a time that is not a number.
        sys.exit(f"fetch_log_classes: cannot read the inputs: {type(e).__name__}: {e}")
