#!/usr/bin/env python3
"""What a look again hours after a find would win, offline, on a fetch log.

scripts/follow_up_headroom.py prices a follow-up within the hour after a fresh find (a
clump in progress). This one prices the day-scale reaction of StormCrawler's rule: after a
fetch on the scored days that found new postings, on a feed with at most MAX_PRIOR postings
in the 14 days before them and the newest at most AGE old (6 h, or any age), one more fetch
D hours later (6, 12 or 24) unless a planned one comes sooner; a follow-up that finds more
may set another. Each line gives the delay with the follow-ups over the log's own, the
follow-ups' share of the fetches, the posting-minutes each saves, and the net: the share
of the summed wait saved beyond what as many average fetches of the run are worth (every
follow-up would be paid for by a planned fetch).

usage: scripts/day_follow_up_headroom.py TRACE_DIR FETCH_LOG FROM_DAY TO_DAY
"""
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from follow_up_headroom import baseline, load_run, summed_wait, with_follow_ups  # noqa: E402


def main():
    postings, fetches, start, end = load_run(__doc__)
    base, n, scored = baseline(postings, fetches, start, end)
    worth = base / scored
    print(f"{n} postings, {scored} fetches on the scored days; average wait {base / n / 60:.1f}"
          f" min; an average fetch is worth {worth / 60:.0f} posting-min")
    for max_prior in (2, 6, 14, 10**9):
        for age_name, age in (("6 h", 6 * 3600), ("any", float("inf"))):
            for hours in (6, 12, 24):
                total, added = 0.0, 0
                for feed, times in fetches.items():
                    ps = postings.get(feed, [])
                    made, a = with_follow_ups(ps, times, start, end, age, hours * 3600, 1, max_prior)
                    total += summed_wait(ps, made, start, end)[0]
                    added += a
                net = (base - total - added * worth) / base
                prior = "any" if max_prior >= 10**9 else f"<= {max_prior}"
                print(f"  prior {prior:>6}, age {age_name:>3}, D {hours:2d} h: {total / base:.3f}, "
                      f"{100 * added / scored:.1f}% more fetches, "
                      f"{(base - total) / 60 / max(added, 1):.0f} posting-min each, net {net:+.3f}")


if __name__ == "__main__":
    main()
