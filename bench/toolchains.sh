#!/usr/bin/env bash
# Benchmark refgate-run's tool caches: `go test` of a small module that
# imports net/http and encoding/json, run inside refgate-run
#
#   cold:    with an empty --cache-dir (the first run on a machine),
#   warm:    again with the same --cache-dir (every run after it),
#   none:    with --no-caches and GOCACHE pointed at TMPDIR (what a run
#            without writable caches pays every time),
#   outside: plain `go test` with a warm cache of its own, for reference.
#
#   bench/toolchains.sh [RUNS]
#
# Default: 3 timed runs of each; the median is printed. Offline
# (GOPROXY=off, standard library only). The binary is $REFGATE_RUN, else
# $REFGATE_BUILD/runner/refgate-run, else build/runner/refgate-run.
set -euo pipefail

runs=${1:-3}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
run=$(bench_binary REFGATE_RUN runner/refgate-run)
command -v go >/dev/null || {
    echo "bench/toolchains.sh: needs go" >&2
    exit 2
}

# Not under /tmp: the run's /tmp is its own.
work=$(mktemp -d /var/tmp/refgate-bench-toolchains.XXXXXX)
chmod 755 "$work"
trap 'chmod -R u+rwx "$work"; rm -rf "$work"' EXIT
export GOPROXY=off GOFLAGS=-mod=mod
mkdir -p "$work/mod"
cd "$work/mod"
printf 'module example.com/bench\n\ngo 1.18\n' >go.mod
cat >b.go <<'GO'
package bench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
)

func Serve() int {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]int{"n": 1})
	}))
	defer s.Close()
	return 1
}
GO
printf 'package bench\n\nimport "testing"\n\nfunc TestServe(t *testing.T) {\n\tif Serve() != 1 {\n\t\tt.Fatal()\n\t}\n}\n' >b_test.go

# time_it CMD...: wall seconds of one run.
time_it() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || {
        echo "bench/toolchains.sh: failed: $*" >&2
        "$@" >&2 || true
        exit 1
    }
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
}
median() { sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }

inside() { "$run" -q --rm "$@" -- go test -count=1 ./...; }

cold=() warm=() none=() outside=()
for i in $(seq "$runs"); do
    rm -rf "$work/caches"
    cold+=("$(time_it inside --cache-dir "$work/caches")")
    warm+=("$(time_it inside --cache-dir "$work/caches")")
    none+=("$(time_it "$run" -q --rm --no-caches -e GOCACHE=/tmp/gocache -- go test -count=1 ./...)")
done
export GOCACHE=$work/outside-cache
go test -count=1 ./... >/dev/null
for i in $(seq "$runs"); do
    outside+=("$(time_it go test -count=1 ./...)")
done

printf 'go test, median of %d (s):\n' "$runs"
printf '  inside, cold cache (first run):        %s\n' "$(printf '%s\n' "${cold[@]}" | median)"
printf '  inside, warm cache (runs after):       %s\n' "$(printf '%s\n' "${warm[@]}" | median)"
printf '  inside, --no-caches (cache in TMPDIR): %s\n' "$(printf '%s\n' "${none[@]}" | median)"
printf '  outside, warm cache:                   %s\n' "$(printf '%s\n' "${outside[@]}" | median)"
