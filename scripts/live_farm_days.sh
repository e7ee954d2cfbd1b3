#!/usr/bin/env bash
# The live system end to end on the wall clock, as issue 7 measured it and issue 28 asks to
# keep: `kairos-farm` serving FEEDS feeds over HOSTS loopback hosts, `kairos-coordinator
# standalone --feeds` crawling them from an empty store at SCALE× (one simulated day per
# wall minute at 1440), then the farm's postings as a trace, replayed with the same budget
# for the references on the same postings: uniform polling and the offline optimal plan
# learned on the days before each day. Prints, per simulated day, live (the standalone
# run's trailing-day delay at the day's end), uniform, offline and the two ratios.
#
# usage: BIN=target/release OUT=/tmp/live scripts/live_farm_days.sh
#   FEEDS (600) HOSTS (300) DAYS (14) SCALE (1440) BUDGET (4 fetches per feed per day)
set -euo pipefail
BIN=$(realpath "${BIN:-target/release}")
OUT=$(realpath -m "${OUT:-/tmp/live-farm}")
FEEDS=${FEEDS:-600} HOSTS=${HOSTS:-300} DAYS=${DAYS:-14} SCALE=${SCALE:-1440} BUDGET=${BUDGET:-4}
mkdir -p "$OUT"
# The farm, and the clock the crawl shares with it.
source "$(dirname "$0")/farm_start.sh"
# The run ends a simulated hour after the last day's end, so that day's line prints.
RUN_MS=$(( DAYS * 86400000 / SCALE + 86400000 / SCALE / 24 ))
"$BIN/kairos-coordinator" standalone --feeds "$OUT/urls.txt" --allow-private 127.0.0.0/8 \
    --fetches-per-feed-per-day "$BUDGET" --run-for "${RUN_MS}ms" --metrics-addr 127.0.0.1:0 \
    --summary-json "$OUT/summary.json" "${CLOCK[@]}" >"$OUT/live.out" 2>"$OUT/live.err" \
    || { tail -3 "$OUT/live.err"; exit 1; }

# The farm's postings as a trace (seconds from the start, the simulated days run).
python3 - "$OUT" "$START_MS" "$FEEDS" "$DAYS" <<'PY'
import sys, os
out, start, feeds, days = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(f"{out}/trace", exist_ok=True)
with open(f"{out}/trace/feeds.csv", "w") as f:
    f.write("feed_id,weight\n")
    for i in range(feeds):
        f.write(f"f{i},1\n")
rows = []
for line in open(f"{out}/postings.raw"):
    i, ms = line.strip().split(",")
    ts = (int(ms) - start) / 1000
    if 0 <= ts < days * 86400:
        rows.append((ts, int(i)))
rows.sort()
with open(f"{out}/trace/postings.csv", "w") as f:
    f.write("feed_id,ts\n")
    for ts, i in rows:
        f.write(f"f{i},{ts:.1f}\n")
PY
"$BIN/kairos-coordinator" replay --trace "$OUT/trace" --fetches-per-feed-per-day "$BUDGET" \
    --train-days $((DAYS > 14 ? 14 : DAYS - 1)) --peers none --json "$OUT/replay.json" \
    >"$OUT/replay.out" 2>"$OUT/replay.err" || { tail -3 "$OUT/replay.err"; exit 1; }

python3 - "$OUT" "$DAYS" "$START_MS" "$BUDGET" "$FEEDS" <<'PY'
import sys, json, re
out, days, start_day = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) // 86400000
budget = float(sys.argv[4]) * int(sys.argv[5])
s = json.load(open(f"{out}/summary.json"))
fetched = {d["day"] - start_day: d["fetches"] for d in s["fetches_by_day"]}
# Each hourly line: "[... sim, day D] ... | last day X min ..."; the first line at or after
# each whole day gives that day's trailing figure.
live = {}
for l in open(f"{out}/live.out"):
    m = re.search(r"day (\d+\.\d+)\].*\| last day ([\d.]+) min", l)
    if not m:
        continue
    d = float(m.group(1))
    k = int(d)
    if d - k < 0.2 and 1 <= k <= days and k not in live:
        live[k] = float(m.group(2))
ref = json.load(open(f"{out}/replay.json"))
print("| day | live (min) | uniform | offline (same history) | live / uniform | live / offline | live fetches / budget |")
print("|---|---|---|---|---|---|---|")
for r in ref:
    d = r["day"]
    if d + 1 not in live:
        continue
    u = r["uniform"]["avg_delay_min"]
    o = r.get("offline_causal", {}).get("avg_delay_min") if r.get("offline_causal") else None
    lv = live[d + 1]
    os_ = f"{o:.1f}" if o else "-"
    ro = f"{lv / o:.3f}" if o else "-"
    print(f"| {d} | {lv:.1f} | {u:.1f} | {os_} | {lv / u:.3f} | {ro} | {fetched.get(d, 0) / budget:.3f} |")
early = sum(v for k, v in fetched.items() if k < 0)
if early:
    print(f"\n{early} fetches before day 0 (the crawl started before the clocks' start)")
print(f"\nsummary: fetches {s['fetches']} of budget {s['budget_fetches']}, postings ingested {s['postings_ingested']}, duplicates {s['duplicates_ingested']}, average delay {s['avg_delay_seconds'] / 60:.1f} min")
PY
