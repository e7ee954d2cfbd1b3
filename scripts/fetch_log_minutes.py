#!/usr/bin/env python3
"""How a live run's fetches fell over the minutes: the busiest minute of each day.

Reads the log `kairos-coordinator replay --fetch-log F` writes (feed_id,ts: seconds from
the trace's start) and, over days FIRST to LAST-1 (default 14 to 55), prints the fetches a
day, the mean minute, the median day's busiest minute (and the worst day's), the median
day's count in its first second, its busiest minute besides the first, and the fetches at
each exact hour over all those days (a replan's catch-ups start at the instant it
arrives). docs/EXPERIMENTS.md ("Live piles") quotes it.

    scripts/fetch_log_minutes.py FETCH_LOG [FIRST [LAST]]
"""
import collections
import csv
import statistics
import sys

DAY = 86_400


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 14
    last = int(sys.argv[3]) if len(sys.argv) > 3 else 56
    minutes = collections.Counter()
    first_second = collections.Counter()
    hours = collections.Counter()
    with open(sys.argv[1], newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            ts = float(row["ts"])
            day = int(ts // DAY)
            if not first <= day < last:
                continue
            minutes[int(ts // 60)] += 1
            if ts % DAY < 1:
                first_second[day] += 1
            if ts % 3600 == 0:
                hours[int(ts % DAY) // 3600] += 1
    days = range(first, last)
    total = sum(minutes.values())
    if total == 0:
        print("no fetches on those days", file=sys.stderr)
        return 1
    busiest = [max(minutes.get(d * 1440 + m, 0) for m in range(1440)) for d in days]
    besides = [max(minutes.get(d * 1440 + m, 0) for m in range(1, 1440)) for d in days]
    print(
        f"days {first}-{last - 1}: fetches a day {total / len(days):.0f}, "
        f"mean minute {total / len(days) / 1440:.2f}; busiest minute: median day "
        f"{statistics.median(busiest):g} (worst {max(busiest)}), besides the first "
        f"{statistics.median(besides):g}; first second: median day "
        f"{statistics.median([first_second.get(d, 0) for d in days]):g}"
    )
    print("at exact hours, all days:", " ".join(f"{h:02}:{n}" for h, n in sorted(hours.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
