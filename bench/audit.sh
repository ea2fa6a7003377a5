#!/usr/bin/env bash
# Audit append rate: audit_bench (bench/audit_bench.c) appends RECORDS
# decision records through the real audit library, every call fsynced, to a
# fresh log in DIR: one record per call from one thread, from THREADS
# threads, and BATCH records per call. Prints records/s for each; the
# figure is DIR's filesystem and device's (fsync dominates).
#
#   bench/audit.sh [RECORDS] [THREADS] [BATCH]     (defaults 2000, 4, 16)
#
# DIR is $BENCH_DIR (default: a fresh directory under /var/tmp, on disk
# rather than a tmpfs /tmp). The program is $AUDIT_BENCH, else
# $REFGATE_BUILD/bench/audit_bench, else build/bench/audit_bench.
#
# BENCH_PG=1: then the same on the PostgreSQL store, in a PostgreSQL
# started for it (tests/support/pg.sh, its data under /tmp) with refgate's
# schema, and the ratio of each figure to the file's.
set -euo pipefail

records=${1:-2000}
threads=${2:-4}
batch=${3:-16}

# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench=$(bench_binary AUDIT_BENCH bench/audit_bench)

dir=${BENCH_DIR:-$(mktemp -d /var/tmp/refgate-bench-audit.XXXXXX)}
[[ -n ${BENCH_DIR:-} ]] || trap 'rm -rf "$dir"' EXIT
echo "log in $dir ($(df --output=fstype "$dir" | tail -1 | tr -d ' '))"
if [[ ${BENCH_PG:-} != 1 ]]; then
    "$bench" "$dir" "$records" "$threads" "$batch"
    exit 0
fi

refgate=$(bench_binary REFGATE cli/refgate)
# shellcheck source=tests/support/pg.sh
source "$(dirname "$0")/../tests/support/pg.sh"
trap 'pg_stop; [[ -n ${BENCH_DIR:-} ]] || rm -rf "$dir"' EXIT
pg_start
printf '{"state_dir": "%s", "state": {"postgres": "%s"}}\n' "$dir" "$PG_URL" >"$dir/refgate.json"
"$refgate" db migrate --config "$dir/refgate.json" >/dev/null
AUDIT_BENCH_PG=$PG_URL "$bench" "$dir" "$records" "$threads" "$batch" | tee "$dir/out"
# Each postgres: line against the file line of the same shape.
awk -F'records/s' '/records\/s/ {
    n = split($1, w, " "); rate = w[n]; label = $1; sub(/ +[0-9]+ records in.*/, "", label)
    if (label ~ /^postgres: /) { sub(/^postgres: /, "", label)
        printf "postgres / file, %-30s %6.2f\n", label ":", rate / file[label] }
    else file[label] = rate }' "$dir/out"
