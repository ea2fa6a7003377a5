#!/usr/bin/env bash
# Run-token verification cost: tokens_bench (bench/tokens_bench.c) checks
# N tokens each way and prints microseconds per token: HMAC-SHA-256 (the
# rg1 tokens before) against Ed25519 (rg2 now) over the same signed text,
# then the whole tokens_verify with the file store and with the PostgreSQL
# store (a real one started here on a unix socket, migrated; skipped when
# PostgreSQL is not installed), with ratios against HMAC.
#
#   bench/tokens.sh [N]     (default 20000)
#
# The program is $TOKENS_BENCH, else $REFGATE_BUILD/bench/tokens_bench,
# else build/bench/tokens_bench; refgate (for `db migrate`) likewise.
set -euo pipefail

n=${1:-20000}
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench=$(bench_binary TOKENS_BENCH bench/tokens_bench)
refgate=$(bench_binary REFGATE cli/refgate)
src=$(cd "$(dirname "$0")/.." && pwd)

dir=$(mktemp -d /tmp/refgate-bench-tokens.XXXXXX)
# shellcheck source=tests/support/pg.sh
. "$src/tests/support/pg.sh"
trap 'pg_stop; rm -rf "$dir"' EXIT
if pg_start >"$dir/pg.out" 2>&1; then
    printf '{"state_dir": "%s/state", "state": {"postgres": "%s"}}\n' "$dir" "$PG_URL" >"$dir/refgate.json"
    "$refgate" db migrate --config "$dir/refgate.json" >/dev/null
else
    cat "$dir/pg.out"
    unset PG_URL
fi
"$bench" "$dir/state" "$n"
