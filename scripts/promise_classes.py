#!/usr/bin/env python3
"""The plans' promise against what they realized, per class of feed, from a promise log.

`replay --promise-log FILE` writes every posting with the time a fetch found it and the
expected delay per posting that the plan in force promised its feed. A feed's promise per
posting depends on its modelled hours and its fetch times, not on its rate, so a class
whose postings wait longer than promised is one whose hours the model knows less well
than it believes (or whose fetches went out later than planned). Postings are grouped by
how many postings their feed had in the 14 days before them; for each class the script
prints the postings found, the realized and promised average delay (minutes) and their
ratio. docs/EXPERIMENTS.md ("Flatter daily shapes for feeds with few postings") used it.

usage: scripts/promise_classes.py PROMISE_LOG [FROM_DAY]
"""
import bisect
import collections
import csv
import math
import sys

DAY = 86400.0
CLASSES = [(0, 2), (3, 5), (6, 11), (12, 23), (24, 59), (60, None)]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    from_day = float(sys.argv[2]) if len(sys.argv) > 2 else 14.0
    def number(text):
        """A finite float, or None for an empty or unusable field."""
        try:
            x = float(text)
        except ValueError:
            return None
        return x if math.isfinite(x) else None

    rows, unusable = [], 0
    try:
        with open(sys.argv[1], newline="") as f:
            for r in csv.DictReader(f):
                t = number(r["published"])
                if t is None:
                    unusable += 1
                    continue
                rows.append((r["feed_id"], t, number(r["found"]), number(r["promised"])))
    except (OSError, KeyError, TypeError, UnicodeDecodeError, csv.Error) as e:
        sys.exit(f"promise_classes: cannot read {sys.argv[1]}: {e}")
    times = collections.defaultdict(list)
    for feed, t, _, _ in rows:
        times[feed].append(t)
    for ts in times.values():
        ts.sort()
    acc = {c: [0, 0.0, 0.0] for c in CLASSES}
    unfound = unplanned = 0
    for feed, t, found, promised in rows:
        if t < from_day * DAY:
            continue
        if found is None:
            unfound += 1
            continue
        if promised is None:
            unplanned += 1
            continue
        ts = times[feed]
        n = bisect.bisect_left(ts, t) - bisect.bisect_left(ts, t - 14 * DAY)
        cls = next(c for c in CLASSES if c[1] is None or n <= c[1])
        a = acc[cls]
        a[0] += 1
        a[1] += found - t
        a[2] += promised
    print(f"{'postings in the 14 days before':<31} {'postings':>8} {'realized':>9} {'promised':>9} {'ratio':>6}")
    total = [0, 0.0, 0.0]
    for (lo, hi), (n, real, prom) in acc.items():
        if n == 0:
            continue
        label = f"{lo}-{hi}" if hi is not None else f"{lo}+"
        print(f"{label:<31} {n:>8} {real / n / 60:>9.1f} {prom / n / 60:>9.1f} {(real / prom if prom > 0 else float('nan')):>6.3f}")
        total = [total[0] + n, total[1] + real, total[2] + prom]
    if total[0]:
        print(f"{'all':<31} {total[0]:>8} {total[1] / total[0] / 60:>9.1f} {total[2] / total[0] / 60:>9.1f} {(total[1] / total[2] if total[2] > 0 else float('nan')):>6.3f}")
    print(
        f"not counted: {unfound} never found (or unreadable), {unplanned} with no plan in force, "
        f"{unusable} with no usable publication time"
    )


if __name__ == "__main__":
    main()
