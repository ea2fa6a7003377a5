# The database half of tests/tokens/test_store.c: a real PostgreSQL,
# migrated by `refgate db migrate`, then the store suite with PG_URL set so
# that every test runs on both stores.
set -euo pipefail
: "${REFGATE:?}" "${REFGATE_SRC:?}" "${REFGATE_BUILD:?}"
T=$(mktemp -d /tmp/rg-tokpg.XXXXXX)
. "$REFGATE_SRC/tests/support/pg.sh"
trap 'pg_stop; rm -rf "$T"' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

cat >"$T/refgate.json" <<JSON
{"state_dir": "state", "state": {"postgres": "$PG_URL"}}
JSON
"$REFGATE" db migrate --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; exit 1; }
"$REFGATE_BUILD/tests/tokens_test_store" --jobs 1 >"$T/suite" 2>&1 || { cat "$T/suite"; exit 1; }
cat "$T/suite"; grep -q "Tested: 14 " "$T/suite" || { echo "FAIL: expected 14 runs (7 tests x 2 stores)"; exit 1; }
# Every test ran on the database: nothing was skipped.
! grep -q "SKIP" "$T/suite" || { echo "FAIL: the database half was skipped"; exit 1; }
grep -q "Failing: 0 | Crashing: 0" "$T/suite"
