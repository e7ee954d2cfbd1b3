#!/usr/bin/env bash
# What `kairosctl history export` gives `replay`, next to the truth: `kairos-farm` serving
# FEEDS feeds over HOSTS loopback hosts, `kairos-coordinator standalone` crawling them from an
# empty store at SCALE× for DAYS simulated days and a little more, then `kairosctl history
# export` just before the run ends. The farm's own postings over the export's days are written as a second trace,
# and both are replayed with the peers at BUDGET fetches per feed per day: the figures of the
# export should be those of the postings as they were published.
#
# usage: BIN=target/release OUT=/tmp/export-check scripts/history_export_check.sh
#   FEEDS (600) HOSTS (300) DAYS (8) SCALE (1440) BUDGET (2) CRAWL (4: the live run's budget)
set -euo pipefail
BIN=$(realpath "${BIN:-target/release}")
OUT=$(realpath -m "${OUT:-/tmp/export-check}")
FEEDS=${FEEDS:-600} HOSTS=${HOSTS:-300} DAYS=${DAYS:-8} SCALE=${SCALE:-1440}
BUDGET=${BUDGET:-2} CRAWL=${CRAWL:-4}
mkdir -p "$OUT"
# The farm, and the clock the crawl shares with it.
source "$(dirname "$0")/farm_start.sh"
PORT=$(( 20000 + RANDOM % 10000 ))
# The export comes 0.4 simulated days after the last whole day, so its feeds have nearly
# all been fetched since that midnight; the run ends a little after.
RUN_MS=$(( (DAYS * 10 + 5) * 8640000 / SCALE ))
"$BIN/kairos-coordinator" standalone --feeds "$OUT/urls.txt" --allow-private 127.0.0.0/8 \
    --fetches-per-feed-per-day "$CRAWL" --run-for "${RUN_MS}ms" --metrics-addr 127.0.0.1:0 \
    --listen "127.0.0.1:$PORT" "${CLOCK[@]}" >"$OUT/live.out" 2>"$OUT/live.err" &
LIVE=$!
sleep "$(echo "($DAYS + 0.4) * 86400 / $SCALE" | bc -l)"
rm -rf "$OUT/export"
"$BIN/kairosctl" --coordinator "http://127.0.0.1:$PORT" -o json history export "$OUT/export" \
    >"$OUT/export.json"
wait $LIVE
cat "$OUT/export.json"

# The farm's postings over the export's span (whole days, start to end), as a trace.
python3 - "$OUT" <<'PY'
import sys, os, json, csv
out = sys.argv[1]
e = json.load(open(f"{out}/export.json"))
start, end = e["start_unix_ms"], e["end_unix_ms"]
os.makedirs(f"{out}/truth", exist_ok=True)
hosts = {r["feed_id"]: r["host"] for r in csv.DictReader(open(f"{out}/export/feeds.csv"))}
urls = [l.strip() for l in open(f"{out}/urls.txt")]
with open(f"{out}/truth/feeds.csv", "w") as f:
    f.write("feed_id,weight,host\n")
    for fid, h in hosts.items():
        f.write(f"{fid},1,{h}\n")
# The export names feeds as the standalone run registered them; map the farm's feed index
# to that id through the URL.
meta = {r["url"]: r["feed_id"] for r in csv.DictReader(open(f"{out}/export/feeds-meta.csv"))}
rows = []
for line in open(f"{out}/postings.raw"):
    i, ms = line.strip().split(",")
    ms = int(ms)
    if start <= ms < end:
        rows.append((ms - start, meta[urls[int(i)]]))
rows.sort()
with open(f"{out}/truth/postings.csv", "w") as f:
    f.write("feed_id,ts\n")
    for ms, fid in rows:
        f.write(f"{fid},{ms / 1000:.3f}\n")
print(f"farm postings over the export's span: {len(rows)}; exported: {e['postings']}")
PY
for t in export truth; do
    "$BIN/kairos-coordinator" replay --trace "$OUT/$t" --fetches-per-feed-per-day "$BUDGET" \
        --peers all --json "$OUT/$t.replay.json" >"$OUT/$t.replay.out" 2>"$OUT/$t.replay.err" \
        || { tail -3 "$OUT/$t.replay.err"; exit 1; }
done
# Each policy's average delay over the scored days, as `replay` prints it, for both traces.
python3 - "$OUT" <<'PY' | tee "$OUT/summary.md"
import sys
out = sys.argv[1]
def figures(t):
    rows = {}
    for l in open(f"{out}/{t}.replay.out"):
        name = l.split("  ")[0].strip()
        if name.startswith(("kairos (live)", "offline", "uniform")) or "(tuned)" in name \
                or "(defaults)" in name:
            try:
                rows[name] = float(l.split()[-2])
            except (ValueError, IndexError):
                pass
    return rows
a, b = figures("export"), figures("truth")
print("| policy | on the export (min) | on the farm's postings (min) | export / farm |")
print("|---|---|---|---|")
for name in a:
    if name in b:
        print(f"| {name} | {a[name]:.2f} | {b[name]:.2f} | {a[name] / b[name]:.3f} |")
PY
