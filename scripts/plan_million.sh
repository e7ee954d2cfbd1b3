#!/bin/bash
# The 1,000,000-feed plan (docs/BENCHMARKS.md, section 5): draws the trace, then runs
# `plan` with the defaults ("on") and with the flags in ALT ("off"; default
# --no-rate-calibration), alternated, RUNS times each, and checks that each variant writes
# the same schedule every time.
#
# usage: BIN=target/release/kairos-coordinator OUT=/tmp/million RUNS=2 [ALT=--no-rate-prior] \
#            scripts/plan_million.sh
# Needs about 4 GiB of memory for the plan and 2 GB of disk for the trace (the
# intensities file, 7.5 GB, is deleted: `plan` does not read it).
set -u
B=$(realpath "${BIN:-target/release/kairos-coordinator}")
OUT=$(realpath -m "${OUT:-/tmp/million}")
T=${TRACE:-$OUT/trace}
mkdir -p "$OUT"
nproc; grep -m1 'model name' /proc/cpuinfo
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
if [ ! -f "$T/postings.csv" ]; then
    s=$(date +%s.%N)
    "$B" synth --out "$T" --feeds 1000000 --users 135000 --days 14 --seed 7 || exit 1
    echo "drawn in $(secs "$s") s"
    rm -f "$T/intensities.csv"
fi
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$(nproc)}
for i in $(seq 1 "${RUNS:-2}"); do
    for m in on off; do
        extra=()
        # shellcheck disable=SC2206 # ALT is a list of flags
        [ "$m" = off ] && extra=(${ALT:---no-rate-calibration})
        s=$(date +%s.%N)
        "$B" plan --trace "$T" --policy optimal --fetches-per-feed-per-day 4 "${extra[@]}" \
            --out "$OUT/schedule-$m-$i" > "$OUT/$m-$i.log" 2>&1
        echo "== defaults $m (off: ${ALT:---no-rate-calibration}), run $i: rc=$? wall $(secs "$s") s"
        grep -E "^(expected delay|allocation|time|memory)" "$OUT/$m-$i.log"
    done
done
for m in on off; do
    for f in "$OUT"/schedule-$m-*; do
        cmp -s "$OUT/schedule-$m-1" "$f" || echo "defaults $m: $f differs from run 1"
    done
done
