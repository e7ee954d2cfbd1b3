#!/usr/bin/env python3
"""How a schedule's fetches fall over the minutes of the day: the busiest minutes.

Reads the schedule `kairos-coordinator plan --out S` writes (feed_id,
fetch_offset_seconds, period_seconds) and prints the day's fetches, the mean, 99th
percentile and largest count of fetches in one minute of the day, and the share of the
day's fetches in its ten busiest minutes. A feed fetched every k days counts 1/k at its
minute, a feed fetched several times a period at each of its minutes. docs/PLANNER.md
("Feeds due at the same minute") and docs/BENCHMARKS.md §3 quote it.

    scripts/plan_minutes.py SCHEDULE.csv
"""
import csv
import sys

DAY = 86_400


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    minutes = [0.0] * (DAY // 60)
    with open(sys.argv[1], newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            period = float(row["period_seconds"])
            offset = float(row["fetch_offset_seconds"])
            if period <= 0:
                print(f"a period of {period} s for {row['feed_id']}", file=sys.stderr)
                return 1
            if period <= DAY:
                per_day = max(1, round(DAY / period))
                for k in range(per_day):
                    minutes[int((offset + k * period) % DAY) // 60] += 1.0
            else:
                minutes[int(offset % DAY) // 60] += DAY / period
    total = sum(minutes)
    if total <= 0:
        print("no fetches in the schedule", file=sys.stderr)
        return 1
    mean = total / len(minutes)
    ranked = sorted(minutes)
    p99 = ranked[int(0.99 * len(ranked))]
    top = ranked[-1]
    print(
        f"fetches a day {total:.0f}; per minute: mean {mean:.2f}, p99 {p99:.1f}, "
        f"busiest {top:.1f} ({top / mean:.1f}x the mean); "
        f"the ten busiest minutes hold {sum(ranked[-10:]) / total:.1%} of the day"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
