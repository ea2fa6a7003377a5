#!/usr/bin/env bash
# How long the gateway's policy takes to decide one ref update against a
# large rule set: builds bench_policy (bench/policy.c) optimised, then runs
# it. The target is under 50 us per decision for 1,000 rules of mixed globs;
# the script says whether it was met and exits 1 when not (BENCH_NO_FAIL=1:
# report only, e.g. on a loaded machine).
#
#   bench/policy.sh [RULES] [DECISIONS] [RUNS]
#
# Defaults: 1000 rules, 20000 decisions, 3 runs (the best is judged: CPU
# time per decision, so other processes on the machine inflate it, never
# deflate it). The build goes to $BENCH_BUILD (default: a build-bench
# directory under $TMPDIR, kept between runs).
set -euo pipefail

rules=${1:-1000}
decisions=${2:-20000}
runs=${3:-3}
limit_us=50

src=$(cd "$(dirname "$0")/.." && pwd)
build=${BENCH_BUILD:-${TMPDIR:-/tmp}/refgate-build-bench}

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DREFGATE_TESTS=OFF >/dev/null
cmake --build "$build" --target bench_policy -j2 >/dev/null

best=
for _ in $(seq 1 "$runs"); do
    out=$("$build/bench/bench_policy" "$rules" "$decisions")
    echo "$out"
    us=$(sed -n 's/^policy_eval: .*: \([0-9.]*\) us per decision$/\1/p' <<<"$out")
    if [[ -z $best ]] || awk -v a="$us" -v b="$best" 'BEGIN { exit !(a < b) }'; then
        best=$us
    fi
done
echo "best: $best us per decision for $rules rules (target: under $limit_us us for 1000)"
if [[ $rules -eq 1000 ]] && ! awk -v a="$best" -v l="$limit_us" 'BEGIN { exit !(a < l) }'; then
    echo "bench/policy.sh: over the target" >&2
    [[ ${BENCH_NO_FAIL:-0} == 1 ]] || exit 1
fi
