"""Reading the CSVs the replay scripts share: a trace's `postings.csv` and `replay
--fetch-log` files, both `feed_id,ts` (seconds from the trace's start)."""

import collections
import csv


def by_feed(path):
    """Sorted times (seconds) per feed id from a `feed_id,ts` CSV."""
    out = collections.defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            out[r["feed_id"]].append(float(r["ts"]))
    for v in out.values():
        v.sort()
    return out
