#!/usr/bin/env python3
"""Split real-commits into sub-populations, one trace folder each (DESIGN.md section 6 format).

Each source of the trace's feeds-meta.csv (gerrit-cq, prow-tide, gh-button, pkg-registry), and
its branch feeds and directory feeds, becomes a trace of its own: its feeds, their postings,
the subscriptions to them, every app-level access (empty feed_id) and the accesses naming
them, and all users. docs/RESULTS.md replays each next to the peers, as stand-ins for real
populations Kairos was not tuned on.

usage: scripts/trace_subsets.py SOURCE_TRACE OUT_DIR
"""
import csv
import os
import sys


def copy_rows(src, dst, name, keep):
    """Copies `name` from src to dst, keeping the rows `keep(row)` accepts; returns the count."""
    kept = 0
    with open(os.path.join(src, name), newline="") as f, open(
        os.path.join(dst, name), "w", newline=""
    ) as out:
        rows = csv.reader(f)
        header = next(rows)
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            if keep(header, row):
                writer.writerow(row)
                kept += 1
    return kept


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    groups = {}
    with open(os.path.join(src, "feeds-meta.csv"), newline="") as f:
        for m in csv.DictReader(f):
            groups.setdefault(m["source"], set()).add(m["feed_id"])
            groups.setdefault("dir" if m["path"] else "branch", set()).add(m["feed_id"])
    for name, feeds in sorted(groups.items()):
        dst = os.path.join(out, name)
        os.makedirs(dst, exist_ok=True)

        def by_feed(header, row, feeds=feeds):
            feed = row[header.index("feed_id")]
            return feed == "" or feed in feeds

        n = copy_rows(src, dst, "feeds.csv", by_feed)
        p = copy_rows(src, dst, "postings.csv", by_feed)
        copy_rows(src, dst, "subscriptions.csv", by_feed)
        copy_rows(src, dst, "accesses.csv", by_feed)
        copy_rows(src, dst, "users.csv", lambda h, r: True)
        print(f"{name}: {n} feeds, {p} postings -> {dst}")


if __name__ == "__main__":
    main()
