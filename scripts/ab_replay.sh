#!/usr/bin/env bash
# A change to the learner judged on several draws at once.
#
# One live `replay` moves by a percent or two with any change to the plans (the schedules,
# the allowance and the next day's models all feed back), which is as large as most changes
# worth trying. So a variant is run on a set of traces and budgets beside the build it
# would replace, and the ratios are summarized per family (geometric mean), not read off one
# run. docs/EXPERIMENTS.md ("A shorter memory on ten draws") is the example. For one trace,
# scripts/trace_twins.py makes copies one posting apart whose figures show how far a single
# run moves by itself ("What moved the figures between builds").
#
#   scripts/ab_replay.sh run TAG            runs every job with $BIN (and $EXTRA flags)
#   scripts/ab_replay.sh compare TAG_A TAG_B   per-job figures, ratios B / A, family means
#
# Environment:
#   BIN    the kairos-coordinator binary (default target/release/kairos-coordinator)
#   OUT    where the logs go, one per TAG and job (default /tmp/kairos-ab)
#   JOBS   space-separated TRACE_DIR:FETCHES_PER_FEED_PER_DAY; a job's family is its trace
#          folder's name up to the first '-' or digit (quiet-10 and quiet-11 are `quiet`)
#   EXTRA  more `replay` flags for this run (a variant behind a flag)
#   P      replays at once (default 2; each runs on one thread)
# Any other environment (a throw-away build's switches) reaches the binary as it is.
# A job whose log already holds a result is not run again.
set -euo pipefail

BIN=${BIN:-target/release/kairos-coordinator}
OUT=${OUT:-/tmp/kairos-ab}
P=${P:-2}
EXTRA=${EXTRA:-}

usage() {
    sed -n '2,23p' "$0" >&2
    exit 2
}

log_of() { # TAG JOB -> log path
    local trace=${2%:*} budget=${2##*:}
    echo "$OUT/$1-$(basename "$trace")-$budget.log"
}

case "${1:-}" in
run)
    [ $# -eq 2 ] || usage
    tag=$2
    : "${JOBS:?JOBS must list TRACE_DIR:BUDGET jobs}"
    [ -x "$BIN" ] || { echo "no binary at $BIN" >&2; exit 1; }
    mkdir -p "$OUT"
    one() {
        local job=$1 trace=${1%:*} budget=${1##*:} log
        log=$(log_of "$TAG" "$job")
        if [ -s "$log" ] && grep -q '^kairos (live)' "$log"; then
            return 0
        fi
        # shellcheck disable=SC2086
        if ! RAYON_NUM_THREADS=1 "$BIN" replay --trace "$trace" \
            --fetches-per-feed-per-day "$budget" --peers none $EXTRA >"$log" 2>&1; then
            echo "replay failed: $job (see $log)" >&2
            return 1
        fi
    }
    export -f one log_of
    export TAG=$tag BIN OUT EXTRA
    printf '%s\n' $JOBS | xargs -P "$P" -I{} bash -c 'one "$@"' _ {}
    ;;
compare)
    [ $# -eq 3 ] || usage
    python3 - "$OUT" "$2" "$3" <<'PY'
import glob, math, os, re, sys

out, a, b = sys.argv[1:4]

def figures(tag):
    """Live delay on days 14 to the end, per job, from each log's window table."""
    found = {}
    for path in glob.glob(os.path.join(out, f"{tag}-*.log")):
        job = os.path.basename(path)[len(tag) + 1 : -len(".log")]
        with open(path) as f:
            for line in f:
                if line.startswith("kairos (live)"):
                    found[job] = float(line.split()[-2])
    return found

fa, fb = figures(a), figures(b)
families = {}
print(f"{'job':<24} {a:>10} {b:>10} {'B / A':>8}")
for job in sorted(set(fa) & set(fb)):
    ratio = fb[job] / fa[job]
    family = re.match(r"[A-Za-z_]+", job).group(0)
    families.setdefault(family, []).append(ratio)
    print(f"{job:<24} {fa[job]:>10.2f} {fb[job]:>10.2f} {ratio:>8.4f}")
for family, ratios in sorted(families.items()):
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{family:<24} geometric mean {mean:.4f} over {len(ratios)} "
          f"(from {min(ratios):.4f} to {max(ratios):.4f})")
missing = sorted(set(fa) ^ set(fb))
if missing:
    print("in one run only:", " ".join(missing))
PY
    ;;
*)
    usage
    ;;
esac
