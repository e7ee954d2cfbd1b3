#!/usr/bin/env bash
# What `replay` costs as a trace grows: for each feed count, a `quiet`-shaped synthetic trace
# (most feeds post less than once a day, bursts, starts and stops; 28 days), then live
# `replay` at one fetch per feed per day, with the peers or without, timed by /usr/bin/time
# (wall seconds, peak resident memory). One run at a time, so the figures are comparable.
#
# usage: BIN=target/release/kairos-coordinator OUT=/tmp/replay-scale scripts/replay_scale.sh
#   SIZES   feed counts (default "600 2400 9600")
#   PEERS   `--peers` value (default all; `none` for Kairos and the references alone)
#   THREADS RAYON_NUM_THREADS (default: every core)
# The table is $OUT/summary.md; docs/BENCHMARKS.md "What a replay costs" is its output.
set -euo pipefail

BIN=$(realpath "${BIN:-target/release/kairos-coordinator}")
OUT=$(realpath -m "${OUT:-/tmp/replay-scale}")
SIZES=${SIZES:-600 2400 9600}
PEERS=${PEERS:-all}
mkdir -p "$OUT"
[ -n "${THREADS:-}" ] && export RAYON_NUM_THREADS=$THREADS

echo "| feeds | postings | peers | wall (s) | peak resident (MiB) | live delay, days 14+ (min) | live / best tuned peer |" >"$OUT/summary.md"
echo "|---|---|---|---|---|---|---|" >>"$OUT/summary.md"
for n in $SIZES; do
    t="$OUT/trace-$n"
    if [ ! -s "$t/postings.csv" ]; then
        # The `quiet` population's shape (scripts/all_targets.sh), users scaled with the feeds.
        "$BIN" synth --out "$t" --feeds "$n" --users $((n / 4)) --days 28 --posts-per-day 0.4 \
            --bursts-per-week 0.3 --burst-postings 4 --start-stop 0.3 --drift 0.1 --seed 8 >/dev/null
    fi
    log="$OUT/replay-$n-$PEERS.log"
    /usr/bin/time -v -o "$OUT/time-$n-$PEERS.txt" "$BIN" replay --trace "$t" \
        --fetches-per-feed-per-day 1 --peers "$PEERS" >"$log" 2>&1
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$OUT/time-$n-$PEERS.txt")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$OUT/time-$n-$PEERS.txt")
    posts=$(($(wc -l <"$t/postings.csv") - 1))
    # Days 14 to the end: the window before the fetches column.
    live=$(awk '/^kairos \(live\) / {print $(NF - 1); exit}' "$log")
    ratio=$(awk '/^kairos \/ best tuned peer/ {print $NF; exit}' "$log")
    echo "| $n | $posts | $PEERS | $wall | $rss | $live | ${ratio:--} |" | tee -a "$OUT/summary.md"
done
