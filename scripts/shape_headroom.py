#!/usr/bin/env python3
"""How much of the gap to the truth plan is the feeds' daily shapes, offline.

On a synthetic trace that carries its generating intensities (`synth`, intensities.csv),
each feed's hours of the day are estimated from its postings before day D in several ways,
n fetches a day are placed where they minimize the expected delay under the estimate
(exactly, on 48 half-hour slots of a periodic day), and the placement is scored under the
feed's true hours over days D to D+6. Feeds are weighed by their true rate; every figure is
relative to placing the fetches by the true hours (1.0 = the shape known exactly).

The estimates, from least to most knowledge:
  flat                     every hour alike
  pooled                   everyone's hours
  own + 4 pooled           the feed's counts and 4 pseudo-postings of everyone's hours
  mixture posterior        the posterior mean under a mixture of K base shapes at any hourly
                           shift, fitted by EM to the counts before D (the live learner's
                           model, control/shapes.rs, with its pseudo-posting per hour)
  mixture fitted on all    the same, the mixture fitted on every day of the trace
  generator's family       the posterior mean under the generator's own twelve templates at
                           shifts -3..3 and flat shares 0-0.8, uniform prior (what a
                           learner that knew the family could reach; not a learner)

Counts are distinct clock hours with postings (a burst counts once). Needs numpy.

usage: scripts/shape_headroom.py TRACE_DIR D [FETCHES_A_DAY] [K]
"""
import csv
import math
import sys

import numpy as np

SLOTS = 48
BINS = 24


def load(trace):
    feeds = [r["feed_id"] for r in csv.DictReader(open(f"{trace}/feeds.csv"))]
    index = {f: i for i, f in enumerate(feeds)}
    times = [[] for _ in feeds]
    for r in csv.DictReader(open(f"{trace}/postings.csv")):
        times[index[r["feed_id"]]].append(float(r["ts"]))
    hours = max((int(r["hour"]) for r in csv.DictReader(open(f"{trace}/intensities.csv"))))
    rates = np.zeros((len(feeds), hours + 1))
    for r in csv.DictReader(open(f"{trace}/intensities.csv")):
        rates[index[r["feed_id"]], int(r["hour"])] = float(r["rate"])
    return times, rates


def hour_counts(times, before_day):
    """Distinct clock hours with postings before `before_day`, by hour of the day."""
    counts = np.zeros((len(times), BINS))
    for i, ts in enumerate(times):
        for h in {int(t // 3600) for t in ts if t < before_day * 86400}:
            counts[i, h % BINS] += 1
    return counts


def to_slots(hourly):
    x = np.repeat(np.maximum(hourly, 1e-12), 2)
    return x / x.sum()


def wait(q, fetches):
    """Expected wait (slots) of a posting drawn from q with fetches at slot boundaries."""
    at = np.array(sorted(fetches))
    s = np.arange(SLOTS)
    i = np.searchsorted(at, s + 1)
    nxt = np.where(i < len(at), at[np.minimum(i, len(at) - 1)], at[0] + SLOTS)
    return float((q * (nxt - s - 0.5)).sum())


def place(q, n):
    """The n fetch boundaries minimizing `wait` under q: for each first fetch, a shortest
    path over the unrolled day (segment costs from prefix sums)."""
    qq = np.concatenate([q, q])
    s = np.arange(2 * SLOTS)
    c1 = np.concatenate([[0], np.cumsum(qq)])
    c2 = np.concatenate([[0], np.cumsum(qq * s)])
    a = np.arange(2 * SLOTS + 1)[:, None]
    b = np.arange(2 * SLOTS + 1)[None, :]
    seg = (b - 0.5) * (c1[b] - c1[a]) - (c2[b] - c2[a])
    seg = np.where((b > a) & (b - a <= SLOTS), seg, np.inf)
    best = (np.inf, None)
    for f0 in range(SLOTS):
        v = np.full(2 * SLOTS + 1, np.inf)
        v[f0] = 0.0
        back = []
        for _ in range(n - 1):
            m = v[:, None] + seg
            back.append(m.argmin(0))
            v = m.min(0)
        total = v + seg[:, f0 + SLOTS]
        last = int(np.argmin(total))
        if total[last] < best[0]:
            path = [last]
            for arg in reversed(back):
                path.append(int(arg[path[-1]]))
            best = (total[last], sorted({p % SLOTS for p in path[:-1] + [f0]}))
    return best[1]


def score(times, rates, shapes, day, n):
    got = ref = 0.0
    for i in range(len(times)):
        truth = rates[i, day * BINS : (day + 7) * BINS]
        truth = truth[: len(truth) // BINS * BINS].reshape(-1, BINS).sum(0)
        weight = truth.sum()
        if weight <= 0:
            continue
        p = to_slots(truth)
        got += weight * wait(p, place(to_slots(shapes[i]), n))
        ref += weight * wait(p, place(p, n))
    return got / ref


def fit_mixture(counts, k, iterations=40, restarts=3, min_postings=3, seed=0):
    """EM over (base shape, shift), a pseudo-posting per hour per shape."""
    rng = np.random.default_rng(seed)
    x = counts[counts.sum(1) >= min_postings]
    aligned = np.stack([np.roll(x, -s, axis=1) for s in range(BINS)], 1)
    best = None
    for _ in range(restarts):
        g = rng.dirichlet(np.ones(BINS) * 2, size=k) + 0.01
        g /= g.sum(1, keepdims=True)
        w = np.ones((k, BINS)) / (k * BINS)
        for _ in range(iterations):
            ll = np.einsum("fsj,kj->fks", aligned, np.log(g)) + np.log(w)[None]
            top = ll.reshape(len(x), -1).max(1)[:, None, None]
            post = np.exp(ll - top)
            z = post.sum((1, 2))
            post /= z[:, None, None]
            total = float((np.log(z) + top[:, 0, 0]).sum())
            w = post.mean(0) + 1e-9
            w /= w.sum()
            g = np.einsum("fks,fsj->kj", post, aligned) + 1.0
            g /= g.sum(1, keepdims=True)
        if best is None or total > best[0]:
            best = (total, g, w)
    _, g, w = best
    shifted = np.stack([np.stack([np.roll(g[j], s) for s in range(BINS)]) for j in range(k)])
    return shifted.reshape(-1, BINS), w.reshape(-1)


def posterior_mean(counts, shapes, prior):
    ll = counts @ np.log(shapes).T + np.log(prior)[None]
    post = np.exp(ll - ll.max(1, keepdims=True))
    post /= post.sum(1, keepdims=True)
    return post @ shapes


def template(t, h):
    """synth.rs `template`: the generator's twelve daily shapes."""
    bump = lambda c, w: math.exp(-(((h - c) / w) ** 2) / 2)
    return [
        0.05 + bump(13, 3), 0.05 + bump(20, 2), 0.02 + bump(9, 0.8), 1.0,
        0.05 + bump(9, 1.5) + bump(17, 1.5), 0.02 + bump(3, 2), 0.1 + bump(12, 5),
        0.02 + bump(16, 0.8), 0.05 + bump(7, 2), 0.05 + bump(22, 1.5), 0.3 + bump(11, 2.5),
        0.05 + bump(6, 1) + bump(14, 1) + bump(21, 1),
    ][t % 12]


def generator_family():
    out = []
    for t in range(12):
        for shift in range(-3, 4):
            w = np.array([template(t, (h - shift) % BINS) for h in range(BINS)])
            w /= w.sum()
            out.extend((1 - a) * w + a / BINS for a in (0.0, 0.2, 0.4, 0.6, 0.8))
    return np.array(out)


def main():
    if len(sys.argv) not in (3, 4, 5):
        sys.exit(__doc__)
    trace, day = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    k = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    times, rates = load(trace)
    counts = hour_counts(times, day)
    everyone = counts.sum(0) / counts.sum()
    feeds = len(times)
    shapes, prior = fit_mixture(counts, k)
    all_shapes, all_prior = fit_mixture(hour_counts(times, rates.shape[1] // BINS), k)
    family = generator_family()
    rows = [
        ("flat", np.ones((feeds, BINS))),
        ("pooled", np.tile(everyone, (feeds, 1))),
        ("own + 4 pooled", counts + 4 * everyone),
        (f"mixture posterior (K={k})", posterior_mean(counts, shapes, prior)),
        ("mixture fitted on all days", posterior_mean(counts, all_shapes, all_prior)),
        ("generator's family", posterior_mean(counts, family, np.ones(len(family)))),
    ]
    print(f"{trace}: shapes from days 0-{day - 1}, {n} fetches a day, scored on days {day}-{day + 6}")
    for name, est in rows:
        print(f"  {name:<28} {score(times, rates, est, day, n):.4f}")


if __name__ == "__main__":
    main()
