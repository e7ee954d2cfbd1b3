#!/usr/bin/env python3
"""What pooling each feed's clump excess across feeds would win, first-order, on a trace.

Rates are learned on days 0 to LEARN_DAYS (default 14): each feed's postings, shrunk by
BETA pseudo-days toward the typical feed's. A clump's excess is marked as
`control/population.rs::clump_excess` marks it (in each clock hour of each day, the postings
beyond what a Poisson draw at that hour's mean on the feed's other days exceeds with
probability 1e-3; one always counts). "own" keeps each feed's excess; "tau T" replaces it by
(E + mu * T) / (days + T) a day, mu the population's excess per feed-day; "tau inf" by mu.
Fetches go to feeds in proportion to the square roots of the rates at 0.5, 1, 2 and 4 a
feed a day, evenly spaced, and every posting after the learning days waits half its feed's
interval. Printed: each variant's average wait in minutes and its ratio to "own" at the same
BETA, and the allocation by the scored days' own counts (an oracle). docs/EXPERIMENTS.md
("Bursts pooled across feeds") quotes it; the live learner shrinks under a fitted
distribution of rates, so live gains are smaller.

usage: scripts/clump_pool_headroom.py TRACE_DIR [LEARN_DAYS]
"""
import collections
import csv
import math
import sys

from clump_hours_fit import poisson_upper


def excess_count(minutes, days):
    """Postings of `minutes` (sorted, within `days` days) that are a clump's excess."""
    if days < 2 or len(minutes) < 2:
        return 0
    hours = [int(t // 60) for t in minutes]
    by_hour = collections.Counter(h % 24 for h in hours)
    cells = collections.Counter(hours)
    total, others, out = len(minutes), days - 1, 0
    for cell, k in cells.items():
        mean = max((by_hour[cell % 24] - k) / others, (total - k) / (24 * others))
        allowed = max(poisson_upper(mean, 1e-3), 1) if mean > 0 else 1
        out += max(0, k - allowed)
    return out


def main():
    trace = sys.argv[1]
    learn = float(sys.argv[2]) if len(sys.argv) > 2 else 14.0
    feeds = [r["feed_id"] for r in csv.DictReader(open(f"{trace}/feeds.csv"))]
    postings = collections.defaultdict(list)
    for r in csv.DictReader(open(f"{trace}/postings.csv")):
        postings[r["feed_id"]].append(float(r["ts"]) / 60.0)
    n, ex, scored = {}, {}, {}
    for f in feeds:
        ts = sorted(postings[f])
        learned = [t for t in ts if t < learn * 1440]
        n[f], ex[f] = len(learned), excess_count(learned, learn)
        scored[f] = len(ts) - len(learned)
    count = len(feeds)
    typical = sum(n.values()) / count / learn
    mu = sum(ex.values()) / count / learn
    print(f"{count} feeds; days 0-{learn:g}: {sum(n.values())} postings, "
          f"{sum(ex.values())} a clump's excess; {sum(scored.values())} postings scored")

    def wait(rate, budget):
        roots = {f: math.sqrt(max(rate[f], 1e-9)) for f in feeds}
        total = sum(roots.values())
        summed = sum(scored[f] * 1440 / (2 * roots[f] / total * budget * count) for f in feeds)
        return summed / max(sum(scored.values()), 1)

    for budget in (0.5, 1, 2, 4):
        cells = []
        for beta in (1, 4):
            own = {f: (n[f] + typical * beta) / (learn + beta) for f in feeds}
            base = wait(own, budget)
            cells.append(f"beta {beta}: own {base:.1f}")
            for tau in (7, 14, 28, math.inf):
                pooled = {}
                for f in feeds:
                    e = mu if math.isinf(tau) else (ex[f] + mu * tau) / (learn + tau)
                    pooled[f] = (n[f] - ex[f] + (typical - mu) * beta) / (learn + beta) + e
                cells.append(f"tau {tau:g} {wait(pooled, budget) / base:.3f}")
        oracle = {f: scored[f] + 1e-6 for f in feeds}
        cells.append(f"oracle {wait(oracle, budget):.1f}")
        print(f"{budget:g} a day: " + ", ".join(cells))


if __name__ == "__main__":
    main()
