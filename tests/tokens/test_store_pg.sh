# The database half of tests/tokens/test_store.c: a real PostgreSQL,
# migrated by `refgate db migrate`, then the store suite with PG_URL set so
# that every test runs on both stores. Then `refgate db import` moves a
# file store (its published keys, a retirement and revocations) into the
# database, twice without duplicating anything.
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
cat "$T/suite"
grep -q "Tested: 16 " "$T/suite" || { echo "FAIL: expected 16 runs (8 tests x 2 stores)"; exit 1; }
# Every test ran on the database: nothing was skipped.
! grep -q "SKIP" "$T/suite" || { echo "FAIL: the database half was skipped"; exit 1; }
grep -q "Failing: 0 | Crashing: 0" "$T/suite" || exit 1

fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$T/upstream"
cat >"$T/files.json" <<JSON
{"state_dir": "state", "upstreams": [{"host": "local", "url": "file://$T/upstream"}]}
JSON
cat >"$T/db.json" <<JSON
{"state_dir": "state", "state": {"postgres": "$PG_URL"},
 "upstreams": [{"host": "local", "url": "file://$T/upstream"}]}
JSON
tok=$("$REFGATE" token mint --config "$T/files.json" --repo local/acme/app)
"$REFGATE" token mint --config "$T/files.json" --repo local/acme/app >/dev/null
"$REFGATE" token revoke --config "$T/files.json" "$tok" >/dev/null
# A retirement, as a rotation writes it, and a revocation a crash cut after its id.
kid=$(cut -d. -f2 <<<"$tok")
printf 'retire %s %s\n' "$kid" "$(date +%s)" >>"$T/state/token-keys"
printf '0123456789abcdef0123456789abcdef' >>"$T/state/revoked"
for round in 1 2; do
  "$REFGATE" db import --config "$T/db.json" >"$T/import" 2>&1 || { cat "$T/import"; fail "import $round"; }
  grep -q "run tokens: 2 key events and 2 revocations imported" "$T/import" || { cat "$T/import"; fail "import said"; }
done
pub=$(sed -n "s/^key $kid \([0-9a-f]*\) .*/\1/p" "$T/state/token-keys")
[ "$(pg_psql "SELECT encode(public_key, 'hex') FROM token_keys WHERE kid = '$kid'")" = "$pub" ] ||
  fail "the public key was not imported"
[ "$(pg_psql "SELECT retired IS NOT NULL FROM token_keys WHERE kid = '$kid'")" = t ] || fail "retirement"
[ "$(pg_psql "SELECT count(*) FROM token_revocations WHERE token_id IN ('$(cut -d' ' -f1 <"$T/state/revoked" | head -1)', '0123456789abcdef0123456789abcdef')")" = 2 ] ||
  fail "revocations: $(pg_psql 'SELECT * FROM token_revocations')"
# The one a crash cut is kept for good rather than pruned early.
[ "$(pg_psql "SELECT expires FROM token_revocations WHERE token_id = '0123456789abcdef0123456789abcdef'")" = 9223372036854775807 ] ||
  fail "a cut revocation got an expiry"
"$REFGATE" db import --config "$T/files.json" >"$T/import" 2>&1 && fail "import without a database"
grep -q 'set "state"' "$T/import" || { cat "$T/import"; fail "no reason"; }
echo "test_store_pg: ok"
