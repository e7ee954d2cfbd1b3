#!/usr/bin/env bash
# Issue 28's targets at one commit: every synthetic variant and `real-commits` at 0.5, 1, 2
# and 4 fetches per feed per day, live `replay --peers all` from an empty store, days 14 to
# the end; one table with each run's live delay, its ratio to the best peer tuned to the
# same fetches (named), the same ratio with the postings lost to full documents priced, its
# ratio to the offline plan learned on the days before each day and to the truth plan
# (synthetic), and the budget's worst days.
#
# usage: BIN=target/release/kairos-coordinator OUT=/tmp/targets P=2 scripts/all_targets.sh
#   REAL    the real trace (default ../shared/traces/real-commits)
#   BUDGETS default "0.5 1 2 4"
#   ONLY    space-separated variant names to run (default: all, `real` included)
#   EXTRA   more `replay` flags for every run (a variant behind a flag, e.g. --no-quick-updates;
#           `--peer-budget both` for the peers held to the live run's fetches from day 0 too)
#   TRACE_DIRS  space-separated NAME=DIR trace folders to run instead of the variants (e.g.
#           the sub-populations of scripts/trace_subsets.py); each is linked as $OUT/traces/NAME
# A run whose log already holds a result is not run again; the table is $OUT/summary.md.
# docs/EXPERIMENTS.md "Every target at one commit, and the forward calibration where it was not
# judged" (2026-12-01) is its output.
set -euo pipefail

BIN=$(realpath "${BIN:-target/release/kairos-coordinator}")
OUT=$(realpath -m "${OUT:-/tmp/targets}")
P=${P:-2}
REAL=$(realpath "${REAL:-../shared/traces/real-commits}")
BUDGETS=${BUDGETS:-0.5 1 2 4}
mkdir -p "$OUT/traces"

# The variants of docs/EXPERIMENTS.md "Synthetic variants, with the truth" (the papers' shape,
# default seed), `quiet` of "Draws Kairos was not tuned on" (seed 8, the draw tuned on) and
# `timers` of "Feeds on a timer, on by default", `digests` of "Feeds on a timer at two
# clock times".
C="--feeds 500 --users 150 --days 28 --posts-per-day 3.4 --subs-per-user 33 --accesses-per-user-per-day 25"
Q="--feeds 600 --users 150 --days 28 --posts-per-day 0.4 --bursts-per-week 0.3 --burst-postings 4 --start-stop 0.3 --drift 0.1 --seed 8"
declare -A FLAGS=(
    [steady]="$C"
    [drift]="$C --drift 0.15"
    [bursts]="$C --bursts-per-week 1 --burst-postings 10"
    [startstop]="$C --start-stop 0.4"
    [mixed]="$C --drift 0.1 --bursts-per-week 0.5 --start-stop 0.3"
    [quiet]="$Q"
    [timers]="--feeds 500 --users 150 --days 28 --posts-per-day 1 --timer-share 0.3 --seed 8"
    [digests]="--feeds 500 --users 150 --days 28 --posts-per-day 1 --timer-share 0.3 --timer-windows 2 --seed 8"
)
ORDER="steady drift bursts startstop mixed quiet timers digests real"
declare -A DIRS=()
if [ -n "${TRACE_DIRS:-}" ]; then
    ORDER=
    for nd in $TRACE_DIRS; do
        DIRS[${nd%%=*}]=$(realpath "${nd#*=}")
        ORDER="$ORDER ${nd%%=*}"
    done
fi
ONLY=${ONLY:-$ORDER}

jobs=()
for v in $ORDER; do
    case " $ONLY " in *" $v "*) ;; *) continue ;; esac
    if [ -n "${DIRS[$v]:-}" ]; then
        ln -sfn "${DIRS[$v]}" "$OUT/traces/$v"
    elif [ "$v" = real ]; then
        ln -sfn "$REAL" "$OUT/traces/real"
    elif [ ! -s "$OUT/traces/$v/postings.csv" ]; then
        # shellcheck disable=SC2086
        "$BIN" synth --out "$OUT/traces/$v" ${FLAGS[$v]} >/dev/null
    fi
    for b in $BUDGETS; do jobs+=("$v $b"); done
done
echo "${#jobs[@]} runs, $P at a time" >&2

run() {
    local log="$OUT/$1-$2.log"
    if [ -s "$log" ] && grep -q '^kairos (live)' "$log"; then return 0; fi
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    RAYON_NUM_THREADS=1 "$BIN" replay --trace "$OUT/traces/$1" --fetches-per-feed-per-day "$2" \
        --peers all --json "$OUT/$1-$2.json" $EXTRA >"$log" 2>&1 || echo "replay failed: $1 $2 (see $log)" >&2
}
export -f run
EXTRA=${EXTRA:-}
export BIN OUT EXTRA
printf "%s\n" "${jobs[@]}" | xargs -P "$P" -L 1 bash -c 'run $0 $1'

python3 - "$OUT" "${jobs[@]}" <<'EOF' | tee "$OUT/summary.md"
import json, sys
out, jobs = sys.argv[1], [j.split() for j in sys.argv[2:]]

def row(v, b):
    lines = open(f"{out}/{v}-{b}.log").read().splitlines()
    days = json.load(open(f"{out}/{v}-{b}.json"))
    rows, feeds = {}, None
    for l in lines:
        for name in ("kairos (live)", "offline (same history)"):
            if l.startswith(name):
                rows[name] = float(l.split()[-2])
        if "(tuned)" in l and not l.startswith("kairos"):
            name = l.split("(tuned)")[0].strip()
            rows.setdefault("peers", {})[name] = float(l.split()[-2])
        if l.startswith("with each lost posting charged"):
            # "... best tuned peer B min (NAME); kairos / best tuned peer, losses priced R"
            name = l.split("min (")[-1].split(")")[0]
            rows["priced"] = f"{float(l.split()[-1]):.3f} ({name})"
        if l.startswith("kairos / truth"):
            rows["truth"] = float(l.split()[-1])
        if l.startswith("replay of"):
            feeds = int(l.split("(")[1].split()[0])
        if l.startswith("calibration, days"):
            # "... came on W of D days, within 15% or two standard errors (...) on C; live /
            # promise over those days R"
            w, d = l.split(" came on ")[1].split(" days")[0].split(" of ")
            c = l.split(" on ")[-1].split(";")[0]
            rows["calibration"] = f"{w} / {c} of {d}, {float(l.split()[-1]):.3f}"
    live = rows["kairos (live)"]
    peer, best = min(rows.get("peers", {}).items(), key=lambda kv: kv[1])
    # Every trace has the offline plan learned on the days before each day (target 1.10);
    # synthetic ones the truth as well (target 1.05 on the papers' shape at four a day).
    offline = f"{live / rows['offline (same history)']:.3f}"
    truth = f"{rows['truth']:.3f}" if "truth" in rows else "-"
    per_day = [d["live"]["fetches"] / (float(b) * feeds) for d in days]
    over = sum(r > 1.0 + 1e-9 for r in per_day)
    cal = rows.get("calibration", "-")
    priced = rows.get("priced", "-")
    return (f"| {v} | {b} | {live:.2f} | {live / best:.3f} ({peer}, {best:.2f}) | {priced} | {offline} | {truth} | {over} of {len(per_day)} | {min(per_day):.3f} (day {per_day.index(min(per_day))}) | {cal} |")


# The last column: days whose live delay is within 15% of the plans' promise for the
# postings that came, then within 15% or two standard errors, of the days scored; and live
# over promise over those days.
# "losses priced": the same ratio with every posting lost to a full document charged the
# plans' price of a lost posting (a day by default), against the best peer on that figure.
print("| trace | budget | live (min) | / best tuned peer (its min) | / best tuned peer, losses priced | / offline | / truth | days over budget | lowest day / budget | promise: days within 15% / or 2 SE, live / promise |")
print("|---|---|---|---|---|---|---|---|---|---|")
for v, b in jobs:
    try:
        print(row(v, b))
    except (OSError, ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as e:
        # A replay that failed or was cut short leaves a log without its figures.
        print(f"| {v} | {b} | no result: {type(e).__name__} {e} | | | | | | | |")
EOF
