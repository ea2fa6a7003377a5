# `refgate db migrate` against a real PostgreSQL: it creates the schema, is
# a no-op the second time, runs safely twice at once, and the config
# refuses a password in the connection string; a database it cannot reach
# is a clear error, never a hang or a message with the password.
set -euo pipefail
: "${REFGATE:?}" "${REFGATE_SRC:?}"
T=$(mktemp -d /tmp/rg-dbmig.XXXXXX)
. "$REFGATE_SRC/tests/support/pg.sh"
trap 'pg_stop; rm -rf "$T"' EXIT
rc=0; pg_start || rc=$?
[ $rc -eq 0 ] || exit $rc

fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$T/state"
cat >"$T/refgate.json" <<JSON
{"state_dir": "state", "state": {"postgres": "$PG_URL"}}
JSON

"$REFGATE" db migrate --config "$T/refgate.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "migrate failed"; }
grep -q "schema migrated from version 0 to 1" "$T/out" || { cat "$T/out"; fail "first migrate"; }
[ "$(pg_psql 'SELECT version FROM refgate_schema')" = 1 ] || fail "schema version not recorded"
[ "$(pg_psql 'SELECT seq FROM audit_head')" = 0 ] || fail "the chain head is not at 0"

"$REFGATE" db migrate --config "$T/refgate.json" >"$T/out" 2>&1 || fail "second migrate failed"
grep -q "nothing to do" "$T/out" || { cat "$T/out"; fail "second migrate did something"; }

# Two at once on a fresh database: the advisory lock makes one wait.
pg_as_owner "$PG_BIN/createdb" -h "$PG_DIR" -U refgate fresh
sed "s|dbname=refgate|dbname=fresh|; s|/refgate?|/fresh?|" "$T/refgate.json" >"$T/fresh.json"
"$REFGATE" db migrate --config "$T/fresh.json" >"$T/a" 2>&1 & a=$!
"$REFGATE" db migrate --config "$T/fresh.json" >"$T/b" 2>&1 & b=$!
wait $a || { cat "$T/a"; fail "concurrent migrate a"; }
wait $b || { cat "$T/b"; fail "concurrent migrate b"; }
cat "$T/a" "$T/b" | grep -c "from version 0 to 1" | grep -qx 1 || { cat "$T/a" "$T/b"; fail "both migrated"; }

# A password in the config is refused, and not echoed.
cat >"$T/pw.json" <<JSON
{"state_dir": "state", "state": {"postgres": "host=$PG_DIR dbname=refgate password=hunter2secret"}}
JSON
if "$REFGATE" db migrate --config "$T/pw.json" >"$T/out" 2>&1; then fail "a password in the config was accepted"; fi
grep -q "holds a password" "$T/out" || { cat "$T/out"; fail "no reason for the password refusal"; }
! grep -q hunter2secret "$T/out" || fail "the password was echoed"

# A database that is not there: a clear, prompt error.
cat >"$T/gone.json" <<JSON
{"state_dir": "state", "state": {"postgres": "postgresql:///refgate?host=$T/nowhere"}}
JSON
if "$REFGATE" db migrate --config "$T/gone.json" >"$T/out" 2>&1; then fail "migrate without a database succeeded"; fi
grep -q "cannot connect to the database" "$T/out" || { cat "$T/out"; fail "unclear error"; }

# The password file is used (scram): a role with a password, and pg_hba for it.
pg_psql "CREATE ROLE gw LOGIN PASSWORD 's3cret-pw'; GRANT ALL ON DATABASE refgate TO gw; GRANT ALL ON SCHEMA public TO gw; GRANT ALL ON ALL TABLES IN SCHEMA public TO gw"
sed -i '1i local refgate gw scram-sha-256' "$PG_DIR/data/pg_hba.conf"
pg_as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" reload >/dev/null; sleep 0.5
printf 's3cret-pw\n' >"$T/pgpass"; chmod 600 "$T/pgpass"
cat >"$T/gw.json" <<JSON
{"state_dir": "state", "state": {"postgres": "postgresql:///refgate?host=$PG_DIR&user=gw", "password_file": "pgpass"}}
JSON
"$REFGATE" db migrate --config "$T/gw.json" >"$T/out" 2>&1 || { cat "$T/out"; fail "migrate with the password file"; }
printf 'wrong\n' >"$T/pgpass"
if "$REFGATE" db migrate --config "$T/gw.json" >"$T/out" 2>&1; then fail "a wrong password was accepted"; fi
grep -q "password authentication failed" "$T/out" || { cat "$T/out"; fail "no reason for the wrong password"; }
! grep -q "wrong" "$T/out" || fail "the password was echoed"
echo "test_migrate: ok"
