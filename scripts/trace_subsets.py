#!/usr/bin/env python3
"""Split real-commits into sub-populations, one trace folder each (DESIGN.md section 6 format).

Each source of the trace's feeds-meta.csv (gerrit-cq, prow-tide, gh-button, pkg-registry), and
its branch feeds and directory feeds, becomes a trace of its own: its feeds, their postings,
the subscriptions to them, every app-level access (empty feed_id) and the accesses naming
them, and all users. docs/EXPERIMENTS.md replays each next to the peers, as stand-ins for real
populations Kairos was not tuned on.

With --sample FRACTION SEED..., each seed gives instead a random share of the feeds (each
feed kept with chance FRACTION), in OUT_DIR/sample-SEED: draws of one real population, so a
change to the learner is judged on several of them rather than on one replay, whose figures
move a percent or two with any change to the plans (scripts/ab_replay.sh).

With --from-day DAY..., each DAY gives instead the whole trace from midnight of that day on,
its times moved back by DAY days (in OUT_DIR/from-day-DAY): the same feeds met later, so a
learner starts from an empty store on another stretch of the same population's history.

usage: scripts/trace_subsets.py SOURCE_TRACE OUT_DIR
       scripts/trace_subsets.py SOURCE_TRACE OUT_DIR --sample FRACTION SEED...
       scripts/trace_subsets.py SOURCE_TRACE OUT_DIR --from-day DAY...
"""
import csv
import os
import random
import sys


def copy_rows(src, dst, name, keep, change=None):
    """Copies `name` from src to dst, keeping the rows `keep(header, row)` accepts, each
    rewritten by `change(header, row)` when given; returns the count."""
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
                writer.writerow(change(header, row) if change else row)
                kept += 1
    return kept


def samples(src, fraction, seeds):
    """Each seed's random share of the feeds, by name (`sample-SEED`)."""
    with open(os.path.join(src, "feeds.csv"), newline="") as f:
        ids = [row["feed_id"] for row in csv.DictReader(f)]
    groups = {}
    for seed in seeds:
        rng = random.Random(seed)
        groups[f"sample-{seed}"] = {i for i in ids if rng.random() < fraction}
    return groups


def by_source(src):
    """Feeds by source and by branch or directory feed (feeds-meta.csv)."""
    groups = {}
    with open(os.path.join(src, "feeds-meta.csv"), newline="") as f:
        for m in csv.DictReader(f):
            groups.setdefault(m["source"], set()).add(m["feed_id"])
            groups.setdefault("dir" if m["path"] else "branch", set()).add(m["feed_id"])
    return groups


def shift_rows(src, dst, name, day):
    """Copies `name` keeping rows from `day` on, their `ts` moved back by `day` days."""
    offset = day * 86400

    def later(header, row):
        return float(row[header.index("ts")]) >= offset

    def moved(header, row):
        i = header.index("ts")
        t = float(row[i])
        row[i] = str(int(t) - offset) if t == int(t) else f"{t - offset:g}"
        return row

    return copy_rows(src, dst, name, later, moved)


def from_days(src, out, days):
    """Writes one trace per day in `days`: the source from that day's midnight on."""
    for day in days:
        dst = os.path.join(out, f"from-day-{day}")
        os.makedirs(dst, exist_ok=True)
        all_rows = lambda h, r: True
        n = copy_rows(src, dst, "feeds.csv", all_rows)
        copy_rows(src, dst, "subscriptions.csv", all_rows)
        copy_rows(src, dst, "users.csv", all_rows)
        p = shift_rows(src, dst, "postings.csv", day)
        shift_rows(src, dst, "accesses.csv", day)
        print(f"from-day-{day}: {n} feeds, {p} postings -> {dst}")


def main():
    args = sys.argv[1:]
    if len(args) >= 4 and args[2] == "--from-day":
        try:
            days = [int(d) for d in args[3:]]
        except ValueError:
            sys.exit(__doc__)
        if any(d < 0 for d in days):
            sys.exit("DAY must be at least 0")
        from_days(args[0], args[1], days)
        return
    if len(args) == 2:
        src, out = args
        groups = by_source(src)
    elif len(args) >= 5 and args[2] == "--sample":
        src, out = args[0], args[1]
        try:
            fraction = float(args[3])
            seeds = [int(s) for s in args[4:]]
        except ValueError:
            sys.exit(__doc__)
        if not 0.0 < fraction <= 1.0:
            sys.exit("FRACTION must be in (0, 1]")
        groups = samples(src, fraction, seeds)
    else:
        sys.exit(__doc__)
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
