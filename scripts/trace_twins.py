#!/usr/bin/env python3
"""Copies of a trace that differ from it by one posting each: the spread of one live run.

A live `replay` feeds back on itself (the fetches decide what the next round learns), so a
change that moves one round's plan a little can move a run's figure by a percent or more.
Replaying copies of a trace that each leave out one posting (or move one by a second) shows
how far a figure moves for reasons that say nothing about the scheduler: the spread one
run's figure carries. docs/EXPERIMENTS.md ("What moved the figures between builds") is the
example.

    scripts/trace_twins.py TRACE_DIR OUT_DIR [COUNT] [--shift SECONDS]

writes OUT_DIR/<name>-t1 … <name>-tCOUNT (default 4). Copy k leaves out the posting on data
line 1 + 211·k of `postings.csv` (taken modulo the number of postings), or with `--shift`
moves it that many seconds later; every other file is linked to the original. Each copy is
a trace folder for `replay --trace`, and its family for `scripts/ab_replay.sh` is the
original's (the name up to the first '-').
"""

import argparse
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("count", nargs="?", type=int, default=4)
    ap.add_argument("--shift", type=float, default=None,
                    help="move the posting this many seconds later instead of leaving it out")
    a = ap.parse_args()
    src = os.path.abspath(a.trace)
    postings = os.path.join(src, "postings.csv")
    if not os.path.isfile(postings):
        print(f"no postings.csv in {src}", file=sys.stderr)
        return 1
    with open(postings, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header, rows = lines[0], lines[1:]
    if not rows:
        print(f"{postings} holds no postings", file=sys.stderr)
        return 1
    name = os.path.basename(src.rstrip("/"))
    for k in range(1, a.count + 1):
        dst = os.path.join(a.out, f"{name}-t{k}")
        os.makedirs(dst, exist_ok=True)
        for entry in os.listdir(src):
            if entry == "postings.csv":
                continue
            link = os.path.join(dst, entry)
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.join(src, entry), link)
        i = (211 * k) % len(rows)
        changed = list(rows)
        if a.shift is None:
            what = f"left out {changed[i]}"
            del changed[i]
        else:
            try:
                feed, ts = changed[i].rsplit(",", 1)
                changed[i] = f"{feed},{float(ts) + a.shift:.1f}"
            except ValueError:
                print(f"{postings}: line {i + 2} is not `feed_id,ts`: {rows[i]!r}", file=sys.stderr)
                return 1
            what = f"moved {rows[i]} to {changed[i]}"
        with open(os.path.join(dst, "postings.csv"), "w", encoding="utf-8") as f:
            f.write("\n".join([header] + changed) + "\n")
        print(f"{dst}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
