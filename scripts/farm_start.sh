# Sourced by the wall-clock scripts (live_farm_days.sh, history_export_check.sh): starts
# `kairos-farm` serving FEEDS feeds over HOSTS loopback hosts for DAYS + 2 simulated days
# (4 postings a feed a day, 20-item documents, seed 7) on a clock that reads START at
# ANCHOR, 15 s from now, and returns at ANCHOR, so the crawl that follows starts on the
# farm's day 0. Needs BIN, OUT, FEEDS, HOSTS, DAYS and SCALE; sets START, START_MS, CLOCK
# (the flags that put a binary on that clock) and FARM (its pid, killed on exit). Its URLs
# go to $OUT/urls.txt and its publication times to $OUT/postings.raw.
START=2026-05-04T00:00:00Z
START_MS=$(date -d "$START" +%s%3N)
ANCHOR=$(( $(date +%s%3N) + 15000 ))
CLOCK=(--time-scale "$SCALE" --clock-start "$START" --clock-anchor-unix-ms "$ANCHOR")
"$BIN/kairos-farm" --feeds "$FEEDS" --hosts "$HOSTS" --posts-per-day 4 --days $((DAYS + 2)) \
    --items-per-doc 20 --seed 7 --urls-out "$OUT/urls.txt" --postings-out "$OUT/postings.raw" \
    "${CLOCK[@]}" >"$OUT/farm.log" 2>&1 &
FARM=$!
trap 'kill $FARM 2>/dev/null || true' EXIT
until grep -q "kairos-farm ready" "$OUT/farm.log"; do
    kill -0 $FARM || { cat "$OUT/farm.log"; exit 1; }
    sleep 0.2
done
WAIT_MS=$(( ANCHOR - $(date +%s%3N) ))
[ "$WAIT_MS" -gt 0 ] || { echo "the farm took longer than its head start" >&2; exit 1; }
sleep "$(echo "$WAIT_MS / 1000" | bc -l)"
