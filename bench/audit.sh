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
"$bench" "$dir" "$records" "$threads" "$batch"
