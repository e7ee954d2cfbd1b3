#!/usr/bin/env python3
"""Where a feed's clumps land in the day: at the hours the feed posts at otherwise, at the
population's usual hours, or anywhere.

Over days FROM..TO of a trace, each feed's postings are cut into clock hours of single days;
a cell's postings beyond what a Poisson draw at the same hour's mean on the feed's other
days (or its mean hour, if higher) exceeds with probability 1e-3 are a clump's excess (the
rule of coordinator/src/control/population.rs::clump_excess). For each clump, the feed's
kept hours without the clump's own kept posting, smoothed by A pseudo-postings of the
pooled shape, give a probability for the clump's hour; so does the pooled shape alone. The
script prints, per A, the blend weight w of that probability against an even day
(w p + (1 - w) / 24) that gives the clumps' hours the highest likelihood, and the
log-likelihood of w = 1 (the feed's own hours alone) over w = 0 (an even day); then the
same for the pooled shape, and for the hours the population's other clumps landed at,
shrunk toward an even day by 1 to 256 pseudo-clumps an hour (leave-one-out).

usage: scripts/clump_hours_fit.py TRACE_DIR [FROM_DAY TO_DAY]   (default days 0 to 14)
"""
import collections
import math
import sys

from trace_io import by_feed

DAY = 86400.0
HOUR = 3600.0
TAIL = 1e-3


def poisson_upper(mean, tail=TAIL):
    """The smallest count c with P(X > c) < tail for X ~ Poisson(mean); above a mean of 50,
    the normal bound the learner uses (population.rs::poisson_upper)."""
    if mean <= 0:
        return 0
    if mean > 50:
        return math.ceil(mean + 4 * math.sqrt(mean) + 1)
    p = math.exp(-mean)
    c, cdf = 0, p
    while 1 - cdf >= tail:
        c += 1
        p *= mean / c
        cdf += p
    return c


def feeds_and_pool(trace, first, last):
    """Per feed with two postings or more: its kept postings per hour and its clumps
    (hour, postings kept of the clump); and the pooled shape of the kept postings."""
    out, pooled = [], [0.0] * 24
    days = last - first
    for times in by_feed(f"{trace}/postings.csv").values():
        t = [x for x in times if first * DAY <= x < last * DAY]
        if len(t) < 2 or days < 2:
            continue
        by_hour = [0] * 24
        for x in t:
            by_hour[int(x % DAY // HOUR)] += 1
        cells = collections.Counter(int(x // HOUR) for x in t)
        kept, clumps = [0] * 24, []
        for cell, k in cells.items():
            h = cell % 24
            mean = max((by_hour[h] - k) / (days - 1), (len(t) - k) / (24 * (days - 1)))
            allowed = max(poisson_upper(mean), 1)
            kept[h] += min(k, allowed)
            if k > allowed:
                clumps.append((h, min(k, allowed)))
        for h in range(24):
            pooled[h] += kept[h]
        out.append((kept, clumps))
    total = sum(pooled)
    return out, [x / total for x in pooled]


def best_blend(probs):
    """The blend weight (0, 0.05, ..., 1) with the highest log-likelihood, and the
    log-likelihood of weight 1 over weight 0."""
    def ll(w):
        return sum(math.log(w * p + (1 - w) / 24) for p in probs)
    w = max((i / 20 for i in range(21)), key=ll)
    return w, ll(1.0) - ll(0.0)


def main():
    trace = sys.argv[1]
    first, last = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (0, 14)
    feeds, pooled = feeds_and_pool(trace, first, last)
    clumps = sum(len(c) for _, c in feeds)
    print(f"{trace}: days {first}-{last}, {clumps} clumps")
    for a in (2, 5, 20):
        probs = []
        for kept, cs in feeds:
            for h, own in cs:
                k = kept[:]
                k[h] -= own
                probs.append((k[h] + a * pooled[h]) / (sum(k) + a))
        w, gain = best_blend(probs)
        print(f"  the feed's own hours, {a:2d} pseudo-postings of the pool: best w {w:.2f}, "
              f"log-likelihood own over even {gain:+.1f}")
    w, gain = best_blend([pooled[h] for _, cs in feeds for h, _ in cs])
    print(f"  the pooled shape: best w {w:.2f}, log-likelihood pooled over even {gain:+.1f}")
    # The hours of the other clumps, one pseudo-clump at each hour (what the learner
    # spreads a clump's excess over: population.rs::clump_hours), without the clump's own.
    hours = [1.0] * 24
    for _, cs in feeds:
        for h, _ in cs:
            hours[h] += 1
    total = sum(hours)
    others = [(hours[h] - 1) / (total - 1) for _, cs in feeds for h, _ in cs]
    w, gain = best_blend(others)
    print(f"  the other clumps' hours: best w {w:.2f}, log-likelihood over even {gain:+.1f}")
    # The same with A pseudo-clumps at each hour in place of one, each clump left out in
    # turn (a Dirichlet of equal weights): how strongly the pool should be shrunk toward an
    # even day, read off the clumps themselves.
    n = sum(hours) - 24
    loo = []
    for a in (1, 4, 16, 64, 256):
        ll = sum((c - 1) * math.log((c - 2 + a) / (n - 1 + 24 * a)) for c in hours if c > 1)
        loo.append(f"A {a}: {ll - n * math.log(1 / 24):+.1f}")
    print(f"  leave-one-out, A pseudo-clumps an hour, log-likelihood over even: {', '.join(loo)}")


if __name__ == "__main__":
    main()
