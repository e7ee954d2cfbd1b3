#!/bin/bash
# The 1,000,000-feed plan (docs/BENCHMARKS.md, section 5): draws the trace, then runs
# `plan` with the defaults ("on") and a variant ("off"), alternated, RUNS times each, and
# checks that each variant writes the same schedule every time. The variant is the same
# binary with the flags in ALT (default --no-rate-calibration) or, with BIN_ALT set,
# another build with the defaults (two builds side by side in one run).
#
# usage: BIN=target/release/kairos-coordinator OUT=/tmp/million RUNS=2 \
#            [ALT=--no-rate-prior | BIN_ALT=/path/to/other/build] scripts/plan_million.sh
# Needs about 4 GiB of memory for the plan and 2 GB of disk for the trace: the
# intensities file (7.5 GB, which `plan` does not read) is written to /dev/null.
set -u
B=$(realpath "${BIN:-target/release/kairos-coordinator}")
B_ALT=$(realpath "${BIN_ALT:-$B}")
OUT=$(realpath -m "${OUT:-/tmp/million}")
T=${TRACE:-$OUT/trace}
mkdir -p "$OUT"
nproc; grep -m1 'model name' /proc/cpuinfo
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
if [ ! -f "$T/postings.csv" ]; then
    mkdir -p "$T"
    ln -sf /dev/null "$T/intensities.csv"
    s=$(date +%s.%N)
    "$B" synth --out "$T" --feeds 1000000 --users 135000 --days 14 --seed 7 || exit 1
    echo "drawn in $(secs "$s") s"
    rm -f "$T/intensities.csv"
fi
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$(nproc)}
for i in $(seq 1 "${RUNS:-2}"); do
    for m in on off; do
        extra=()
        bin=$B
        if [ "$m" = off ] && [ -n "${BIN_ALT:-}" ]; then
            bin=$B_ALT
        elif [ "$m" = off ]; then
            # shellcheck disable=SC2206 # ALT is a list of flags
            extra=(${ALT:---no-rate-calibration})
        fi
        s=$(date +%s.%N)
        "$bin" plan --trace "$T" --policy optimal --fetches-per-feed-per-day 4 "${extra[@]}" \
            --out "$OUT/schedule-$m-$i" > "$OUT/$m-$i.log" 2>&1
        echo "== $m ($bin ${extra[*]}), run $i: rc=$? wall $(secs "$s") s"
        grep -E "^(expected delay|allocation|time|memory|peak)" "$OUT/$m-$i.log"
    done
done
for m in on off; do
    for f in "$OUT"/schedule-$m-*; do
        cmp -s "$OUT/schedule-$m-1" "$f" || echo "$m: $f differs from run 1"
    done
done
cmp -s "$OUT/schedule-on-1" "$OUT/schedule-off-1" && echo "on and off: the same schedule"
