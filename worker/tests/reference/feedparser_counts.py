#!/usr/bin/env python3
"""The reference reader's view of the shared feeds corpus: for every document in
MANIFEST.tsv, whether Python's feedparser read it cleanly (bozo = 0) and how many entries it
found. worker/tests/reference.rs compares Kairos' parser with it.

Usage: feedparser_counts.py CORPUS_DIR
Prints `path<TAB>clean<TAB>entries` lines (clean: 1, 0, or `error` if feedparser raised).
"""

import os
import sys

import feedparser


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "MANIFEST.tsv"), encoding="utf-8") as f:
        paths = [line.split("\t")[0] for line in f.read().splitlines()[1:] if line]
    for path in paths:
        with open(os.path.join(root, path), "rb") as f:
            data = f.read()
        try:
            parsed = feedparser.parse(data)
        except Exception:  # a reference that crashes reads nothing cleanly
            print(f"{path}\terror\t0")
            continue
        print(f"{path}\t{0 if parsed.bozo else 1}\t{len(parsed.entries)}")


if __name__ == "__main__":
    main()
