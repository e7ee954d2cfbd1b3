#!/bin/bash
# Live `replay --peers all` on fresh draws of the synthetic families (seeds the learner was
# not tuned on), many at a time, one thread each; prints each run's ratio to the best tuned
# peer and to the truth plan, and writes them to $OUT/summary.txt.
#
# usage: BIN=target/release/kairos-coordinator OUT=/tmp/draws P=16 scripts/unseen_draws.sh
# Seeds per family: QUIET_SEEDS, STEADY_SEEDS, SS_SEEDS, NEWS_SEEDS, TIMERS_SEEDS,
# DIGESTS_SEEDS (empty: none of it).
# docs/EXPERIMENTS.md, "Draws Kairos was not tuned on", ran it on 16 cores (38 runs, 4.3 min).
set -u
B=$(realpath "${BIN:-target/release/kairos-coordinator}")
OUT=$(realpath -m "${OUT:-/tmp/draws}")
P=${P:-$(nproc)}
TRACES=${TRACES:-$OUT/traces}
mkdir -p "$OUT" "$TRACES"
Q="--feeds 600 --users 150 --days 28 --posts-per-day 0.4 --bursts-per-week 0.3 --burst-postings 4 --start-stop 0.3 --drift 0.1"
C="--feeds 500 --users 150 --days 28 --posts-per-day 3.4 --subs-per-user 33 --accesses-per-user-per-day 25"
N="--feeds 400 --users 150 --days 28 --posts-per-day 15"
T="--feeds 500 --users 150 --days 28 --posts-per-day 1 --timer-share 0.3"
jobs=()
draw() { "$B" synth --out "$TRACES/$1" $2 --seed "$3" >/dev/null || exit 1; }
for s in ${NEWS_SEEDS-11 12}; do draw news-$s "$N" $s; for b in 1 4; do jobs+=("news-$s $b"); done; done
for s in ${QUIET_SEEDS-10 11 12 13 14 15}; do draw quiet-$s "$Q" $s; for b in 0.5 1 2 4; do jobs+=("quiet-$s $b"); done; done
for s in ${STEADY_SEEDS-11 12 13 14}; do draw steady-$s "$C" $s; jobs+=("steady-$s 4"); done
for s in ${SS_SEEDS-11 12 13}; do draw startstop-$s "$C --start-stop 0.4" $s; for b in 2 4; do jobs+=("startstop-$s $b"); done; done
for s in ${TIMERS_SEEDS-10 11}; do draw timers-$s "$T" $s; for b in 1 4; do jobs+=("timers-$s $b"); done; done
for s in ${DIGESTS_SEEDS-10 11}; do draw digests-$s "$T --timer-windows 2" $s; for b in 1 4; do jobs+=("digests-$s $b"); done; done
echo "${#jobs[@]} runs, $P at a time"
run() {
    RAYON_NUM_THREADS=1 "$B" replay --trace "$TRACES/$1" --fetches-per-feed-per-day "$2" \
        --peers all > "$OUT/$1-$2.log" 2>&1
    echo "done $1 $2 rc=$?"
}
export -f run
export B OUT TRACES
printf "%s\n" "${jobs[@]}" | xargs -P "$P" -L 1 bash -c 'run $0 $1'
for f in "$OUT"/*-*.log; do
    best=$(grep -E '^kairos / best tuned peer' "$f" | awk '{print $NF}')
    truth=$(grep -E '^kairos / truth' "$f" | awk '{print $NF}')
    echo "$(basename "$f" .log) best-peer $best truth $truth"
done | tee "$OUT/summary.txt"
